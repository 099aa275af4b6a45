#include "runtime/device/cuda_kernel_inventory.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

#include "runtime/util/error.h"
#include "runtime/util/strings.h"

namespace dtrain {
namespace {

// The fatbinary layout as NVIDIA's toolchain writes it (the format cuobjdump reads; NVIDIA does not
// document it, so it is checked against cuobjdump's listing in test/unit/cuda_kernel_inventory_test.cpp).
// A .nv_fatbin section holds fatbinaries back to back, 8-byte aligned; each is a header and a run of
// entries, one per kernel image, each an entry header followed by its (possibly compressed) payload.
constexpr uint32_t kFatbinMagic = 0xBA55ED50;
struct FatbinHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t header_size;
  uint64_t entries_size;  // bytes of the entries after the header
};
constexpr uint16_t kKindPtx = 1;
constexpr uint16_t kKindElf = 2;
constexpr uint64_t kArchSpecificFlag = 0x100000;  // the "a" of sm_90a
struct EntryHeader {
  uint16_t kind;
  uint16_t version;
  uint32_t header_size;  // the payload starts this far from the entry's start
  uint64_t payload_size;
  uint32_t compressed_size;
  uint32_t unknown;
  uint16_t minor;
  uint16_t major;
  uint32_t arch;
  uint32_t name_offset;
  uint32_t name_size;
  uint64_t flags;
};
static_assert(sizeof(FatbinHeader) == 16 && sizeof(EntryHeader) == 48, "fatbinary headers are packed");

class File final {
 public:
  explicit File(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw DataError("cannot open '" + path + "': " + std::strerror(errno));
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  template <class T>
  T read(uint64_t offset) const {
    T value;
    const ssize_t n = ::pread(fd_, &value, sizeof value, static_cast<off_t>(offset));
    if (n != static_cast<ssize_t>(sizeof value)) {
      throw DataError("cannot read '" + path_ + "' at byte " + std::to_string(offset) + ": " +
                      (n < 0 ? std::strerror(errno) : "the file ends there"));
    }
    return value;
  }

  std::string read_string(uint64_t offset, size_t max) const {
    std::string text(max, '\0');
    const ssize_t n = ::pread(fd_, text.data(), max, static_cast<off_t>(offset));
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return text.substr(0, text.find('\0'));
  }

 private:
  std::string path_;
  int fd_;
};

bool same(const KernelImage& a, const KernelImage& b) {
  return a.arch == b.arch && a.ptx == b.ptx && a.arch_specific == b.arch_specific;
}

}  // namespace

std::string to_string(const KernelImage& image) {
  return (image.ptx ? "compute_" : "sm_") + std::to_string(image.arch) + (image.arch_specific ? "a" : "");
}

bool runs_on(const KernelImage& image, int major, int minor) {
  const int device = 10 * major + minor;
  if (image.ptx) return image.arch <= device;
  if (image.arch_specific) return image.arch == device;
  return image.arch / 10 == major && image.arch % 10 <= minor;
}

bool CudaKernelInventory::runs_on(int major, int minor) const {
  return std::all_of(modules_.begin(), modules_.end(), [&](const std::vector<KernelImage>& images) {
    return std::any_of(images.begin(), images.end(), [&](const KernelImage& i) { return dtrain::runs_on(i, major, minor); });
  });
}

std::string CudaKernelInventory::common_images() const {
  if (modules_.empty()) return "none";
  std::vector<KernelImage> common;
  for (const KernelImage& image : modules_.front()) {
    const bool everywhere = std::all_of(modules_.begin(), modules_.end(), [&](const std::vector<KernelImage>& m) {
      return std::any_of(m.begin(), m.end(), [&](const KernelImage& i) { return same(i, image); });
    });
    if (everywhere && std::none_of(common.begin(), common.end(), [&](const KernelImage& i) { return same(i, image); })) {
      common.push_back(image);
    }
  }
  std::sort(common.begin(), common.end(), [](const KernelImage& a, const KernelImage& b) {
    return std::make_tuple(a.ptx, a.arch, a.arch_specific) < std::make_tuple(b.ptx, b.arch, b.arch_specific);
  });
  const std::string text = join(common, ", ", [](const KernelImage& image) { return to_string(image); });
  return text.empty() ? "none in common" : text;
}

std::optional<CudaKernelInventory> read_cuda_kernel_inventory(const std::string& path) {
  const File file(path);
  const auto elf = file.read<Elf64_Ehdr>(0);
  if (std::memcmp(elf.e_ident, ELFMAG, SELFMAG) != 0 || elf.e_ident[EI_CLASS] != ELFCLASS64 ||
      elf.e_shentsize != sizeof(Elf64_Shdr) || elf.e_shstrndx >= elf.e_shnum) {
    throw DataError("'" + path + "' is not a 64-bit ELF file with section headers");
  }
  const auto names = file.read<Elf64_Shdr>(elf.e_shoff + uint64_t{elf.e_shstrndx} * sizeof(Elf64_Shdr));
  std::optional<Elf64_Shdr> fatbin;
  for (uint16_t i = 0; i < elf.e_shnum && !fatbin; ++i) {
    const auto section = file.read<Elf64_Shdr>(elf.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr));
    if (file.read_string(names.sh_offset + section.sh_name, 16) == ".nv_fatbin") fatbin = section;
  }
  if (!fatbin) return std::nullopt;

  const std::string malformed = "'" + path + "' has a malformed .nv_fatbin section";
  std::vector<std::vector<KernelImage>> modules;
  const uint64_t begin = fatbin->sh_offset;
  const uint64_t end = begin + fatbin->sh_size;
  for (uint64_t at = begin; at + sizeof(FatbinHeader) <= end;) {
    const auto header = file.read<FatbinHeader>(at);
    if (header.magic != kFatbinMagic) {
      at += 8;  // padding between fatbinaries
      continue;
    }
    const uint64_t entries_end = at + header.header_size + header.entries_size;
    if (header.header_size < sizeof(FatbinHeader) || entries_end > end) throw DataError(malformed);
    std::vector<KernelImage> images;
    for (uint64_t entry = at + header.header_size; entry + sizeof(EntryHeader) <= entries_end;) {
      const auto e = file.read<EntryHeader>(entry);
      if (e.header_size < sizeof(EntryHeader)) throw DataError(malformed);
      if (e.kind == kKindPtx || e.kind == kKindElf) {
        images.push_back(KernelImage{static_cast<int>(e.arch), e.kind == kKindPtx, (e.flags & kArchSpecificFlag) != 0});
      }
      entry += e.header_size + e.payload_size;
    }
    modules.push_back(std::move(images));
    at = entries_end;
  }
  return CudaKernelInventory(std::move(modules));
}

std::string loaded_library_path(const std::string& name) {
  struct Search {
    const std::string* name;
    std::string found;
  } search{&name, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr) return 0;
        const std::string path = info->dlpi_name;
        const std::string file = path.substr(path.find_last_of('/') + 1);
        if (file.find(*s->name) == std::string::npos) return 0;
        s->found = path;
        return 1;
      },
      &search);
  return search.found;
}

}  // namespace dtrain
