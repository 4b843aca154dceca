# Copies of src/ with one change each to the wide float GEMM kernel (src/cuda/gemm_kernels.cuh),
# for bench/gemm_variants.sh: OUTDIR/<name>/src for every variant below.
#   python3 bench/gemm_variants.py ROOT OUTDIR
# foldreg/foldsmem: a canonical block as the sequential sum of its 32-long fma chains (the sum in
# registers or in 64 KB of dynamic shared memory); lb2: two blocks per SM; swz: thread blocks in
# groups of 8 tile columns; u4: the k loop unrolled 4 instead of fully; bk8: 8-deep k steps;
# veconly: the 16-byte loads alone, without the element-wise path for edges and unaligned operands;
# t8x4: 8 x 4 outputs a thread (512 threads a tile, 16 warps an SM at 128 registers);
# kb128/kb64/kb32: canonical blocks of 128, 64 or 32 k (src/ops/gemm.hpp's kGemmBlockK) instead
# of 256, the same kernel: shorter fma chains, more pushes onto the block counter. The copy
# kernel's fmas of one k (whose even rows walk their columns backwards) in another order, the same
# chains: copyrows every row forwards, copyji the columns outside and the rows inside, copyserprev
# the odd rows backwards (the kernel's order until partial run 148); copystackswap,
# copyscalarstore, copyboth and copyserprevboth free the sums' registers from 16-byte accesses
# (see stackswap below).
import os, shutil, sys
root, out = sys.argv[1], sys.argv[2]
K = 'src/cuda/gemm_kernels.cuh'
H = 'src/ops/gemm.hpp'
def variant(name, edit):  # edit: a function of the kernel file, (another file, its function),
    d = os.path.join(out, name)  # or a list of such pairs
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(root, 'src'), os.path.join(d, 'src'))
    edits = edit if isinstance(edit, list) else [edit if isinstance(edit, tuple) else (K, edit)]
    for f, e in edits:
        p = os.path.join(d, f); s = open(p).read(); s2 = e(s)
        assert s2 != s or name == 'base', name
        open(p, 'w').write(s2)
def rep(s, a, b):
    assert a in s, a[:60]; return s.replace(a, b, 1)
BE = "  auto block_ends = [&](i64 k0) { return (k0 + BK - kb) % kGemmBlockK == 0 || k0 + BK >= ke; };"
SUBDEF = BE + "\n  auto sub_ends = [&](i64 k0) { return (k0 + BK - kb) % 32 == 0 || k0 + BK >= ke; };\n  bool first_sub = true;\n"
DBLOOP = """      compute(buf);
      if (block_ends(k0)) {
        counter.push(acc);
        if (more)
          set_zero(acc);
      }"""
def foldreg(s):
    s = rep(s, BE, SUBDEF + "  T blk[TM][TN];\n")
    return rep(s, DBLOOP, """      compute(buf);
      if (sub_ends(k0)) {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j)
            blk[i][j] = first_sub ? acc[i][j] : rn_add(blk[i][j], acc[i][j]);
        first_sub = false;
        if (!block_ends(k0))
          set_zero(acc);
      }
      if (block_ends(k0)) {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j)
            acc[i][j] = blk[i][j];
        first_sub = true;
        counter.push(acc);
        if (more)
          set_zero(acc);
      }""")
def foldsmem(s):
    s = rep(s, BE, SUBDEF + "  extern __shared__ __align__(16) unsigned char dyn_smem[];\n  float4* bsm = reinterpret_cast<float4*>(dyn_smem);\n")
    return rep(s, DBLOOP, """      compute(buf);
      if (sub_ends(k0)) {
        const bool be = block_ends(k0);
#pragma unroll
        for (int c = 0; c < TM * TN / 4; ++c) {
          const int i = c * 4 / TN, j = c * 4 % TN;
          float4 v;
          if (first_sub) {
            v = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
          } else {
            v = bsm[c * NT + tid];
            v.x = rn_add(v.x, acc[i][j]); v.y = rn_add(v.y, acc[i][j + 1]);
            v.z = rn_add(v.z, acc[i][j + 2]); v.w = rn_add(v.w, acc[i][j + 3]);
          }
          if (be) {
            acc[i][j] = v.x; acc[i][j + 1] = v.y; acc[i][j + 2] = v.z; acc[i][j + 3] = v.w;
          } else {
            bsm[c * NT + tid] = v;
          }
        }
        first_sub = be;
        if (!be)
          set_zero(acc);
      }
      if (block_ends(k0)) {
        counter.push(acc);
        if (more)
          set_zero(acc);
      }""")
def lb2(s):
    return rep(s, "__launch_bounds__(kThreads<Cfg>, 1)", "__launch_bounds__(kThreads<Cfg>, 2)")
def swz(s):
    return rep(s, "  const i64 row0 = static_cast<i64>(blockIdx.x) * BM, col0 = static_cast<i64>(blockIdx.y) * BN;",
"""  const unsigned lin = blockIdx.x + gridDim.x * blockIdx.y, per = 8u * gridDim.x, grp = lin / per;
  const unsigned first = grp * 8u, gsz = gridDim.y - first < 8u ? gridDim.y - first : 8u;
  const unsigned bxs = (lin % per) / gsz, bys = first + (lin % per) % gsz;
  const i64 row0 = static_cast<i64>(bxs) * BM, col0 = static_cast<i64>(bys) * BN;""")
KKLOOP = """#pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
        T ra[TM], rb[TN];"""
def unr(nu):
    return lambda s: rep(s, KKLOOP, KKLOOP.replace("#pragma unroll\n", "#pragma unroll %d\n" % nu, 1))
WIDE_FLOAT = "static constexpr int BM = 128, BN = 128, BK = 16, TM = 8, TN = 8;"  # WideFloatTiles
def float_tiles(bk, tn):  # WideFloatTiles with k steps of bk and tn outputs a thread along n
    return lambda s: rep(s, WIDE_FLOAT, WIDE_FLOAT.replace("BK = 16", f"BK = {bk}").replace("TN = 8", f"TN = {tn}"))
bk8 = float_tiles(8, 8)
def veconly(s):  # the 16-byte path alone (4096^3 takes nothing else): what the element path costs
    s = rep(s, "fetched_vec = vec_block && k0 + BK <= ke;", "fetched_vec = true;")
    assert s.count("      if (fetched_vec) {") == 2
    return s.replace("      if (fetched_vec) {", "      if (true) {")
def t8x4(s):  # 8 x 4 outputs a thread: 512 threads a 128 x 128 tile, 128 registers, 16 warps an SM
    return rep(float_tiles(16, 4)(s), "constexpr int NG = CONTIG ? 2 : 1, GW = TN / NG;",
               "constexpr int NG = CONTIG && TN >= 8 ? 2 : 1, GW = TN / NG;")
C = 'src/cuda/gemm_copy_tiles.cuh'
COPY_FMAS = """#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int jj = 0; jj < TN; ++jj) {
            const int j = i % 2 == 1 ? jj : TN - 1 - jj;
            acc[i][j] = rn_fma(a[i][q], b[j], acc[i][j]);
          }"""
def copy_fmas(order):  # gemm_copy_tiles' fmas of one k in another order (the same chains)
    return lambda s: rep(s, COPY_FMAS, order)
copyrows = copy_fmas("""#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j)
            acc[i][j] = rn_fma(a[i][q], b[j], acc[i][j]);""")
copyji = copy_fmas("""#pragma unroll
        for (int j = 0; j < TN; ++j)
#pragma unroll
          for (int i = 0; i < TM; ++i)
            acc[i][j] = rn_fma(a[i][q], b[j], acc[i][j]);""")
copyserprev = copy_fmas(COPY_FMAS.replace("i % 2 == 1 ? jj", "i % 2 == 0 ? jj"))
# The block counter's levels keep each pair of adjacent outputs swapped (level[i][j ^ 1] holds
# acc[i][j]), and the copy kernel writes c one element at a time: the two 16-byte accesses that
# tie each run of 4 sums to an aligned quad of registers, whose banks then match b's (loaded the
# same way); the same sums and bits. Scored with bench/sass_bank_conflicts.py (sm_90), against
# the odd-rows-backwards kernel's 0.346: copystackswap 0.306, copyboth 0.320, copyserprevboth 0.310
# (0.288 and 0.271 with a shorter store loop: the score moves with code elsewhere in the kernel,
# as ptxas's allocation does). Timed on an H100 against that kernel's 3.363 ms (partial run 148):
# 3.363-3.372, 3.452-3.458 and 3.376-3.377 ms, none faster; a lower score did not buy time here.
EACH_PAIR = """    for (int i = 0; i < static_cast<int>(std::extent_v<X>); ++i)
      each_pair(x[i], y[i], f);"""
def stackswap(s):
    return rep(s, EACH_PAIR, """    for (int i = 0; i < static_cast<int>(std::extent_v<X>); ++i) {
      constexpr bool leaf = !std::is_array_v<std::remove_extent_t<X>>;
      each_pair(x[leaf && std::extent_v<X> % 2 == 0 ? (i ^ 1) : i], y[i], f);
    }""")
def scalarstore(s):
    return rep(s, "      store_run(c, r, col0 + g * (BN / 2) + tx * GW, crs, ccs, n, run, epi, atomic, raw);",
               """#pragma unroll
      for (int q = 0; q < GW; ++q) {
        const i64 col = col0 + g * (BN / 2) + tx * GW + q;
        float* eq = c + r * crs + col * ccs;
        if (col >= n)
          continue;
        if (atomic)
          atomicAdd(eq, epi.alpha == 1.0f ? run[q] : rn_mul(epi.alpha, run[q]));
        else
          *eq = raw ? run[q] : epi(run[q], eq);
      }""")
def kblock(kb):
    return H, lambda s: rep(s, "constexpr std::int64_t kGemmBlockK = 256;",
                            f"constexpr std::int64_t kGemmBlockK = {kb};")
VARIANTS = {
    'base': lambda s: s, 'foldreg': foldreg, 'foldsmem': foldsmem, 'lb2': lb2, 'swz': swz,
    'swzfoldsmem': lambda s: swz(foldsmem(s)), 'foldreg_u4': lambda s: unr(4)(foldreg(s)),
    'foldreg_u2': lambda s: unr(2)(foldreg(s)), 'foldreg_bk8': lambda s: bk8(foldreg(s)),
    'u4': unr(4), 'bk8': bk8, 'veconly': veconly,
    'veconly_foldsmem': lambda s: foldsmem(veconly(s)), 'veconly_foldreg': lambda s: foldreg(veconly(s)),
    't8x4': t8x4, 't8x4_foldreg': lambda s: foldreg(t8x4(s)),
    't8x4_veconly_foldreg': lambda s: foldreg(veconly(t8x4(s))),
    't8x4_foldsmem': lambda s: foldsmem(t8x4(s)),
    'copyrows': (C, copyrows), 'copyji': (C, copyji), 'copyserprev': (C, copyserprev),
    'copystackswap': (K, stackswap), 'copyscalarstore': (C, scalarstore),
    'copyboth': [(K, stackswap), (C, scalarstore)],
    'copyserprevboth': [(K, stackswap), (C, lambda s: scalarstore(copyserprev(s)))],
    'kb128': kblock(128), 'kb64': kblock(64), 'kb32': kblock(32),
}
for name in sys.argv[3:] or VARIANTS:
    variant(name, VARIANTS[name])
