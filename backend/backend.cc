#include "backend/backend.h"

#include <chrono>
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

int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Stream::stamp(absl::AnyInvocable<void(int64_t ns) &&> done) {
  hostCallback([done = std::move(done)]() mutable { std::move(done)(steadyNowNs()); });
}

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
