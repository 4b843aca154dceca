// bfloat16 and float16: the conversions of samebits/half.hpp against an independent reference
// (every bit pattern, midpoints, random floats and doubles, the special values), and the dtypes
// through the tensor core (names, sizes, fills, hashes, from_vector, convert).
#include "samebits/random.hpp"
#include "testing.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace samebits {
namespace {

// The format as plain numbers: exponent and mantissa widths, so that the reference computes
// values with ldexp and never with the bit tricks under test.
struct Format {
  const char* name;
  int mant_bits; // 7 for bf16, 10 for f16
  int exp_bits;  // 8 and 5
  std::uint16_t (*from_float)(float);
  float (*to_float)(std::uint16_t);
};

const Format kBf16{"bfloat16", 7, 8, half_bits::bf16_from_float, half_bits::float_from_bf16};
const Format kF16{"float16", 10, 5, half_bits::f16_from_float, half_bits::float_from_f16};

std::uint16_t inf_bits(const Format& f) {
  return static_cast<std::uint16_t>(((1u << f.exp_bits) - 1u) << f.mant_bits);
}
bool is_nan_bits(const Format& f, std::uint16_t b) {
  return (b & 0x7fffu) > inf_bits(f);
}

// The value of a non-negative finite pattern, computed from its fields.
double value_of(const Format& f, std::uint32_t b) {
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const std::uint32_t e = b >> f.mant_bits, m = b & ((1u << f.mant_bits) - 1u);
  if (e == 0)
    return std::ldexp(static_cast<double>(m), 1 - bias - f.mant_bits);
  return std::ldexp(static_cast<double>(m + (1u << f.mant_bits)),
                    static_cast<int>(e) - bias - f.mant_bits);
}

// Round to nearest even of any finite or infinite double, by search over the ordered positive
// patterns: the largest pattern at or below |x|, then the nearer neighbour, the even one on a tie.
std::uint16_t reference_round(const Format& f, double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double ax = std::fabs(x);
  const std::uint32_t inf = inf_bits(f), max_finite = inf - 1;
  // Beyond the largest finite value, the next step (of the same size) stands for infinity.
  auto value = [&](std::uint32_t b) {
    return b == inf ? 2 * value_of(f, max_finite) - value_of(f, max_finite - 1) : value_of(f, b);
  };
  if (ax >= value(inf))
    return static_cast<std::uint16_t>(sign | inf);
  std::uint32_t lo = 0, hi = inf; // value(lo) <= ax < value(hi)
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) / 2;
    (value(mid) <= ax ? lo : hi) = mid;
  }
  const double dl = ax - value(lo), dh = value(hi) - ax;
  const std::uint32_t r = dl < dh ? lo : dh < dl ? hi : ((lo & 1u) == 0 ? lo : hi);
  return static_cast<std::uint16_t>(sign | r);
}

class HalfFormat : public ::testing::TestWithParam<const Format*> {};

TEST_P(HalfFormat, EveryPatternConvertsExactlyToFloat) {
  const Format& f = *GetParam();
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float v = f.to_float(h);
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
    if ((h & 0x7fffu) == inf_bits(f)) {
      EXPECT_TRUE(std::isinf(v)) << b;
    } else if (is_nan_bits(f, h)) {
      // A NaN keeps its sign and its payload, shifted to float32's top mantissa bits.
      EXPECT_TRUE(std::isnan(v)) << b;
      EXPECT_EQ(bits >> 31, b >> 15u) << b;
      EXPECT_EQ((bits >> (23 - f.mant_bits)) & ((1u << f.mant_bits) - 1u),
                b & ((1u << f.mant_bits) - 1u))
          << b;
    } else {
      const double want = value_of(f, h & 0x7fffu) * ((h & 0x8000u) ? -1.0 : 1.0);
      EXPECT_EQ(static_cast<double>(v), want) << f.name << " pattern " << b;
      EXPECT_EQ(std::signbit(v), (h & 0x8000u) != 0) << b; // -0 stays -0
    }
  }
}

TEST_P(HalfFormat, EveryPatternRoundTrips) {
  const Format& f = *GetParam();
  const std::uint16_t quiet = static_cast<std::uint16_t>(1u << (f.mant_bits - 1));
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const std::uint16_t back = f.from_float(f.to_float(h));
    // NaNs come back quiet: the pattern itself when it was, with the quiet bit set otherwise.
    EXPECT_EQ(back, is_nan_bits(f, h) ? static_cast<std::uint16_t>(h | quiet) : h)
        << f.name << " pattern " << b;
  }
}

TEST_P(HalfFormat, RoundingMatchesTheReference) {
  const Format& f = *GetParam();
  std::vector<float> xs;
  // Every value, the midpoints between neighbours (the ties), and one float32 ulp either side.
  for (std::uint32_t b = 0; b + 1 < inf_bits(f); ++b) {
    const double lo = value_of(f, b), hi = value_of(f, b + 1);
    const auto mid = static_cast<float>((lo + hi) / 2); // exact: one bit more than the format
    for (float x : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, std::numeric_limits<float>::infinity())}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  // The tie between the largest finite value and infinity, and far beyond.
  const double top = value_of(f, inf_bits(f) - 1u), step = top - value_of(f, inf_bits(f) - 2u);
  const auto edge = static_cast<float>(top + step / 2);
  for (float x : {edge, std::nextafter(edge, 0.0f),
                  std::nextafter(edge, std::numeric_limits<float>::infinity()),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()}) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  // Random float32 bit patterns over every exponent.
  std::mt19937 gen(static_cast<std::uint32_t>(testing::fresh_seed()));
  for (int i = 0; i < 1 << 20; ++i) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(gen()));
    if (!std::isnan(x))
      xs.push_back(x);
  }
  std::int64_t wrong = 0;
  for (float x : xs) {
    const std::uint16_t got = f.from_float(x), want = reference_round(f, x);
    if (got != want && ++wrong < 10)
      ADD_FAILURE() << f.name << ": " << x << " (float bits " << std::hex
                    << std::bit_cast<std::uint32_t>(x) << ") gave " << got << ", want " << want;
  }
  EXPECT_EQ(wrong, 0);
}

TEST_P(HalfFormat, NanStaysNanWithItsSign) {
  const Format& f = *GetParam();
  for (std::uint32_t bits :
       {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7fa00000u}) {
    const std::uint16_t h = f.from_float(std::bit_cast<float>(bits));
    EXPECT_TRUE(is_nan_bits(f, h)) << std::hex << bits;
    EXPECT_EQ(h >> 15, bits >> 31) << std::hex << bits;
    EXPECT_TRUE(std::isnan(f.to_float(h)));
  }
}

TEST_P(HalfFormat, FromDoubleIsRoundedOnce) {
  const Format& f = *GetParam();
  auto from_double = [&](double d) { return f.mant_bits == 7 ? bf16(d).bits : f16(d).bits; };
  std::mt19937_64 gen(testing::fresh_seed());
  std::int64_t wrong = 0, double_rounding_cases = 0;
  for (std::uint32_t b = 0; b + 1 < inf_bits(f); b += 7) {
    // Just above and below a tie in float64: through float32 with nearest rounding these land on
    // the tie, and would then go to the even neighbour instead of the nearer one.
    const double mid = (value_of(f, b) + value_of(f, b + 1)) / 2;
    for (double d : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e300)}) {
      const std::uint16_t got = from_double(d), want = reference_round(f, d);
      double_rounding_cases += f.from_float(static_cast<float>(d)) != want;
      wrong += got != want;
    }
  }
  for (int i = 0; i < 1 << 16; ++i) {
    const double d = std::ldexp(static_cast<double>(gen() >> 11), -static_cast<int>(gen() % 200));
    wrong += from_double(d) != reference_round(f, d);
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(double_rounding_cases, 0); // the cases above do test something
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfFormat, ::testing::Values(&kBf16, &kF16),
                         [](const auto& info) { return std::string(info.param->name); });

TEST(HalfDtype, NamesSizesAndParsing) {
  EXPECT_EQ(to_string(DType::bf16), "bfloat16");
  EXPECT_EQ(to_string(DType::f16), "float16");
  EXPECT_EQ(size_of(DType::bf16), 2u);
  EXPECT_EQ(size_of(DType::f16), 2u);
  EXPECT_TRUE(is_floating(DType::bf16) && is_half(DType::f16) && !is_half(DType::f32));
  for (const char* s : {"bfloat16", "bf16"})
    EXPECT_EQ(parse_dtype(s), DType::bf16);
  for (const char* s : {"float16", "f16", "half"})
    EXPECT_EQ(parse_dtype(s), DType::f16);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_THROW(parse_dtype("bfloat"), InvalidArgument);
  const Tensor t = Tensor::empty({2, 3}, DType::bf16);
  EXPECT_EQ(t.nbytes(), 12u);
  EXPECT_EQ(t.view().describe(), "bfloat16[2, 3] cpu");
}

TEST(HalfDtype, TensorsHoldAndHashTheirBits) {
  const std::vector<bf16> v{bf16(1.0f), bf16(-2.5f), bf16(3.0e38f), bf16(1e-40f)};
  const Tensor t = Tensor::from_vector(v, {4});
  EXPECT_EQ(t.data<bf16>()[1].bits, 0xc020);
  EXPECT_EQ(t.to_vector<bf16>()[2].bits, bf16(3.0e38f).bits);
  EXPECT_THROW(t.data<f16>(), InvalidArgument);
  // The same 16-bit words as float16 hash differently: the dtype is part of the hash.
  Tensor h = Tensor::empty({4}, DType::f16);
  std::memcpy(h.raw(), t.raw(), 8);
  EXPECT_NE(content_hash(t), content_hash(h));
  Tensor f = Tensor::full({3}, 0.1, DType::f16);
  EXPECT_EQ(f.data<f16>()[2].bits, 0x2e66); // 0.1 rounded once: 0.0999755859375
  EXPECT_EQ(Tensor::full({1}, 1e6, DType::f16).data<f16>()[0].bits, 0x7c00);
  const auto d = testing::to_doubles(f);
  EXPECT_EQ(d[0], 0.0999755859375);
}

TEST(HalfDtype, ConvertRoundsOnceAndAnyStrides) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Tensor x = testing::random_normal({5, 7}, DType::f32, seed);
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor h = Tensor::empty({5, 7}, dt);
    convert(x, h);
    Tensor back = Tensor::empty({5, 7}, DType::f32);
    convert(h, back);
    const auto xs = x.to_vector<float>();
    const auto bs = back.to_vector<float>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const std::uint16_t want =
          dt == DType::bf16 ? half_bits::bf16_from_float(xs[i]) : half_bits::f16_from_float(xs[i]);
      const float wf =
          dt == DType::bf16 ? half_bits::float_from_bf16(want) : half_bits::float_from_f16(want);
      EXPECT_EQ(bs[i], wf);
    }
    // A transposed source and a strided destination give the same values.
    Tensor keep;
    const Tensor ht = Tensor::empty({7, 5}, dt);
    convert(x.view().transpose(0, 1), ht);
    Tensor back_t = Tensor::empty({5, 7}, DType::f32);
    convert(ht.view().transpose(0, 1), back_t);
    EXPECT_TRUE(bitwise_equal(back, back_t));
    // Random fills of half tensors are the float32 values rounded once.
    Tensor r = Tensor::empty({64}, dt), rf = Tensor::empty({64}, DType::f32);
    fill_normal(r, seed, 3);
    fill_normal(rf, seed, 3);
    Tensor rr = Tensor::empty({64}, dt);
    convert(rf, rr);
    EXPECT_TRUE(bitwise_equal(r, rr));
  }
  EXPECT_THROW(convert(x, Tensor::empty({5, 7}, DType::i32)), InvalidArgument);
}

} // namespace
} // namespace samebits
