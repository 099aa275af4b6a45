# Finds NCCL's header and library and defines the imported target NCCL::NCCL.
# Looks in NCCL_ROOT (CMake or environment variable), the CUDA toolkit, the nvidia-nccl package that pip
# installs next to a pip torch (site-packages/nvidia/nccl, found from Torch_DIR), then the system paths.
# Sets NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY and NCCL_VERSION (from nccl.h).
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT})
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_ROOT})
endif()
if(CUDAToolkit_INCLUDE_DIRS)
  foreach(_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    get_filename_component(_parent "${_dir}" DIRECTORY)
    list(APPEND _nccl_hints "${_parent}")
  endforeach()
endif()
if(Torch_DIR)
  # pip layout: site-packages/torch/share/cmake/Torch -> site-packages/nvidia/nccl
  get_filename_component(_site "${Torch_DIR}/../../../.." ABSOLUTE)
  list(APPEND _nccl_hints "${_site}/nvidia/nccl" "${_site}/nvidia/cu13" "${_site}/nvidia/cu12")
endif()

find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
# pip's package ships only the versioned soname, so name it explicitly as well.
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${_part} +([0-9]+).*" "\\1" _nccl_${_part} "${_nccl_version_lines}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL SHARED IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
