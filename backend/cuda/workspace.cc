#include "backend/cuda/workspace.h"

#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"

namespace tandem::backend::cuda {

Workspace::~Workspace() {
  if (data_ == nullptr) return;
  (void)memory_.idle();
  memory_.release(data_);
}

absl::Status Workspace::reserve(int64_t bytes, const std::string& what) {
  if (bytes <= bytes_) return absl::OkStatus();
  if (frozen_)
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": needs ", bytes, " bytes of workspace on ", device_, ", which holds ", bytes_,
        " and may not grow: a recorded step points into it (make every kernel before the "
        "first step is recorded)"));
  // Only while the module loads: whatever ran on the device before is done with the old
  // buffer before it goes.
  if (data_ != nullptr) {
    RETURN_IF_ERROR(memory_.idle());
    memory_.release(data_);
    data_ = nullptr;
    bytes_ = 0;
  }
  absl::StatusOr<void*> data = memory_.allocate(bytes);
  if (!data.ok())
    return absl::Status(data.status().code(),
                        absl::StrCat(what, ": ", bytes, " bytes of workspace on ", device_, ": ",
                                     data.status().message()));
  data_ = *data;
  bytes_ = bytes;
  largest_ = what;
  return absl::OkStatus();
}

absl::StatusOr<void*> Workspace::get(int64_t bytes, const std::string& what) const {
  if (bytes <= bytes_) return data_;
  return absl::InternalError(absl::StrCat(
      what, ": a launch asks for ", bytes, " bytes of workspace on ", device_, ", more than the ",
      bytes_, " reserved when the kernels were made (a kernel must reserve what it uses)"));
}

}  // namespace tandem::backend::cuda
