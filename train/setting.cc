#include "train/setting.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tandem::training {
namespace {

constexpr std::array kKeys = {
#define TANDEM_SETTING_KEY(name, key) absl::string_view(key),
    TANDEM_TRAIN_SETTINGS(TANDEM_SETTING_KEY)
#undef TANDEM_SETTING_KEY
};

class KeyNames final : public SettingNames {
 public:
  std::string name(Setting s) const override { return std::string(settingKey(s)); }
};

}  // namespace

absl::string_view settingKey(Setting s) { return kKeys[static_cast<size_t>(s)]; }

bool settingOfKey(absl::string_view key, Setting* out) {
  // Checkpoints before issue 41 stored `tandem train`'s flags: --weight-decay.
  std::string k(key);
  if (absl::ConsumePrefix(&key, "--")) {
    k = std::string(key);
    std::replace(k.begin(), k.end(), '-', '_');
  }
  for (size_t i = 0; i < kKeys.size(); ++i)
    if (kKeys[i] == k) {
      *out = static_cast<Setting>(i);
      return true;
    }
  return false;
}

const SettingNames& settingKeys() {
  static const KeyNames names;
  return names;
}

absl::Status settingError(const SettingNames& names, Setting s, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(names(s), ": ", message));
}

}  // namespace tandem::training
