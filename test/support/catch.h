// Include this instead of <catch2/catch.hpp>. LibTorch's c10 logging pulls in glog, whose CHECK macro
// silently replaces Catch's when a torch header comes second: glog's aborts instead of reporting. Taking
// glog first and dropping its CHECK keeps Catch's (glog's include guard stops it coming back).
#pragma once

#include <c10/util/Logging.h>
#undef CHECK
#include <catch2/catch.hpp>
