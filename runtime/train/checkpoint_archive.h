// What a checkpoint's archive may hold, checked before LibTorch parses it. LibTorch's reader trusts its
// input: fuzzing crashed 1.13's unpickler and TorchScript importer on archives with valid CRC-32s and a
// changed pickle or code record (a one-character change of a class annotation segfaults in
// ScriptTypeParser::parseClassConstant). A dtrain checkpoint holds no code to run, only nested objects
// of attributes, so what it may hold is known and small:
//   - records: <archive>/version, data.pkl, constants.pkl, code/__torch__.py and
//     code/__torch__/___torch_mangle_<N>.py with their .debug_pkl, data/<N> (tensor bytes), and the
//     .data/version, .data/serialization_id and byteorder records of LibTorch 2;
//   - code: one `class Module(Module):` per record declaring __parameters__, __buffers__, and attributes
//     of the types Tensor, int, float, bool, str, tuples of those, or another class of the archive, with
//     no class containing itself;
//   - pickles: the opcodes LibTorch's pickler writes, run here on a typed stack: objects of the declared
//     classes with exactly their declared attributes and types, tensors of the storages named in data/,
//     each storage's record exactly as long as its element count says and each tensor inside its storage.
// Anything else is refused before LibTorch sees it. What is accepted is what LibTorch 1.13, 2.7 and 2.11
// write for dtrain's checkpoints (test/unit/checkpoint_archive_test.cpp checks this build's own).
#pragma once

#include <string>
#include <string_view>

namespace dtrain {

// "" when `bytes`, an archive zip_damage() passed, holds only what a dtrain checkpoint may (above);
// else what does not, naming the record (and the line, for code), e.g. "record 'archive/code/__torch__.py'
// line 3: 'epoch : Tensr' is not an attribute of a type a dtrain checkpoint holds".
std::string checkpoint_archive_problem(std::string_view bytes);

}  // namespace dtrain
