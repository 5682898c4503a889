#include "backend/backend.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::backend {

void DeviceBuffer::release() {
  if (data_ != nullptr && release_) release_(data_);
  data_ = nullptr;
  bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    where_ = other.where_;
    release_ = other.release_;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

std::string toString(const MemoryLocation& where) {
  switch (where.space) {
    case MemoryLocation::Space::kHost:
      return "host";
    case MemoryLocation::Space::kPinnedHost:
      return "pinned host";
    case MemoryLocation::Space::kDevice:
      return absl::StrCat("device ", where.device);
  }
  return "?";
}

}  // namespace tandem::backend
