// Philox4x32-10 against the known-answer vectors published with Random123 (kat_vectors).
#include "samebits/rng.hpp"

#include <gtest/gtest.h>

namespace samebits {
namespace {

TEST(Philox, KnownAnswerVectors) {
  using rng::Block;
  EXPECT_EQ(rng::philox4x32_10(Block{0, 0, 0, 0}, {0, 0}),
            (Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(rng::philox4x32_10(Block{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                               {0xffffffffu, 0xffffffffu}),
            (Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(rng::philox4x32_10(Block{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                               {0xa4093822u, 0x299f31d0u}),
            (Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, UniformIsInUnitIntervalAndPure) {
  double mean = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = rng::uniform(42, 7, static_cast<std::uint64_t>(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u, rng::uniform(42, 7, static_cast<std::uint64_t>(i)));
    mean += u;
  }
  EXPECT_NEAR(mean / n, 0.5, 0.01);
  EXPECT_NE(rng::uniform(42, 7, 0), rng::uniform(43, 7, 0));
  EXPECT_NE(rng::uniform(42, 7, 0), rng::uniform(42, 8, 0));
}

} // namespace
} // namespace samebits
