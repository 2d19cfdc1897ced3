// sha256.h against the standard's examples (FIPS 180-4's SHA-256 examples, as NIST publishes
// them with the standard: "abc", the 448-bit two-block message, one million "a"), and against
// digests from an independent implementation (Python's hashlib) of the empty message, the
// 896-bit message, and runs of "a" at every padding boundary (55/56, 63/64/65, 119/120 bytes).
// Exits 1, naming the message, on a mismatch.
#include "sha256.h"

#include <cstdio>
#include <string>

namespace {

int failures = 0;

void expect(const std::string& what, const std::string& message, const std::string& digest) {
  const std::string got = gateway::sha256_hex(message);
  if (got != digest) {
    std::printf("FAILED: SHA-256 of %s is %s, expected %s\n", what.c_str(), got.c_str(),
                digest.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  expect("\"abc\"", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  expect("the 448-bit message", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  expect("the 896-bit message",
         "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
         "lmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  expect("one million \"a\"", std::string(1'000'000, 'a'),
         "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  expect("the empty message", "",
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::pair<int, const char*> boundaries[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"}};
  for (const auto& [length, digest] : boundaries) {
    expect(std::to_string(length) + " \"a\"", std::string(static_cast<std::size_t>(length), 'a'),
           digest);
  }
  if (gateway::key_owner("abc") != "key:ba7816bf8f01cfea") {
    std::printf("FAILED: key_owner(\"abc\") is %s\n", gateway::key_owner("abc").c_str());
    ++failures;
  }
  if (failures == 0) std::printf("sha256: every digest as expected\n");
  return failures == 0 ? 0 : 1;
}
