"""grid_sampler_2d's backward (F.grid_sample: bilinear, nearest, bicubic) for the drop-in mode.

torch computes the input gradient by adding every output gradient, weighted, into the input
pixels it was sampled from, with atomics on CUDA (it throws under
torch.use_deterministic_algorithms). Here that scatter is one samebits index_add: the input
gradient as rows [N * (H * W + 1), C] (channels last, one spare row per batch element that takes
the corners outside the input and is dropped), the sources [N * OH * OW * corners, C] in the order
(n, oh, ow, corner), so each input pixel adds its contributions in ascending output position, in
the canonical order of index_add. The grid gradient has no accumulation across output positions:
per output position, a sum over channels and corners of input value * weight derivative *
output gradient, computed elementwise in torch and summed with samebits's sum (its canonical
order: the same bits on the CPU and CUDA at portable).

Coordinates follow torch's GridSampler.h (grid_sampler_compute_source_index_set_grad) in the
grid's dtype (float32 for half grids): unnormalize, then border clipping or reflection; bicubic
unnormalizes only and pads each of its 16 taps (compute_coordinates), with torch's cubic
coefficients (A = -0.75) and their derivatives.
"""
import torch

from . import _ops

BILINEAR, NEAREST, BICUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2
_A = -0.75   # torch's cubic convolution constant


def _clip(coord, size):
    """torch's clip_coordinates_set_grad: coord clipped to [0, size - 1], and its derivative
    (0 on and beyond the borders)."""
    top = float(size - 1)
    inside = (coord > 0) & (coord < top)
    clipped = torch.where(coord <= 0, torch.zeros_like(coord),
                          torch.where(coord >= top, torch.full_like(coord, top), coord))
    return clipped, inside.to(coord.dtype)


def _reflect(coord, twice_low, twice_high):
    """torch's reflect_coordinates_set_grad: coord reflected into [low, high], and its
    derivative (+1 or -1)."""
    if twice_low == twice_high:
        return torch.zeros_like(coord), torch.zeros_like(coord)
    low = float(twice_low) / 2
    span = float(twice_high - twice_low) / 2
    coord = coord - low
    sign = torch.where(coord < 0, -torch.ones_like(coord), torch.ones_like(coord))
    coord = coord.abs()
    extra = torch.fmod(coord, span)
    flips = torch.floor(coord / span)
    even = torch.remainder(flips, 2) == 0
    out = torch.where(even, extra + low, span - extra + low)
    return out, torch.where(even, sign, -sign)


def _source_index(coord, size, padding_mode, align_corners):
    """The source pixel coordinate of a grid coordinate and d(source)/d(grid)."""
    if align_corners:
        coord, mult = ((coord + 1) / 2) * (size - 1), (size - 1) / 2
    else:
        coord, mult = ((coord + 1) * size - 1) / 2, size / 2
    mult = torch.full_like(coord, mult)
    if padding_mode == BORDER:
        coord, g = _clip(coord, size)
        mult = mult * g
    elif padding_mode == REFLECTION:
        if align_corners:
            coord, g_refl = _reflect(coord, 0, 2 * (size - 1))
        else:
            coord, g_refl = _reflect(coord, -1, 2 * size - 1)
        coord, g_clip = _clip(coord, size)
        mult = mult * g_refl * g_clip
    return coord, mult


def _tap_coordinates(coord, size, padding_mode, align_corners):
    """torch's compute_coordinates for bicubic's integer taps: clipped or reflected into the
    input (no derivative: the grid gradient treats the padded values as constants)."""
    if padding_mode == BORDER:
        return _clip(coord, size)[0]
    if padding_mode == REFLECTION:
        if align_corners:
            coord = _reflect(coord, 0, 2 * (size - 1))[0]
        else:
            coord = _reflect(coord, -1, 2 * size - 1)[0]
        return _clip(coord, size)[0]
    return coord


def _cubic(t):
    """torch's get_cubic_upsampling_coefficients and get_cubic_coefficients_grad at t."""
    def near(x):
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x):
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
    coeffs = [far(t + 1), near(t), near(1 - t), far((1 - t) + 1)]
    x0, x1, x2, x3 = -1 - t, -t, 1 - t, 2 - t
    grads = [(-3 * _A * x0 - 10 * _A) * x0 - 8 * _A,
             (-3 * (_A + 2) * x1 - 2 * (_A + 3)) * x1,
             (3 * (_A + 2) * x2 - 2 * (_A + 3)) * x2,
             (3 * _A * x3 - 10 * _A) * x3 + 8 * _A]
    return coeffs, grads


def _corners(ix, iy, h, w, dummy):
    """For integer-valued (float) corner coordinates [..., k]: the flat pixel index (int64), with
    `dummy` where the corner lies outside the input (NaN included), and that validity mask."""
    valid = (ix >= 0) & (ix <= w - 1) & (iy >= 0) & (iy <= h - 1)
    zero = torch.zeros_like(ix)
    flat = (torch.where(valid, iy, zero).to(torch.int64) * w
            + torch.where(valid, ix, zero).to(torch.int64))
    return torch.where(valid, flat, torch.full_like(flat, dummy)), valid


def backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
             output_mask, level):
    """(grad_input, grad_grid) of grid_sampler_2d, as aten's grid_sampler_2d_backward returns
    them (each None when output_mask says it is not needed)."""
    n, c, h, w = input.shape
    oh, ow = grid.shape[1], grid.shape[2]
    dtype = input.dtype
    acc = torch.float32 if dtype in _ops.HALF else dtype      # half: computed in float32
    g = grid.to(acc)
    # Bicubic pads its taps, not the sampling point.
    point_padding = ZEROS if interpolation_mode == BICUBIC else padding_mode
    ix, mult_x = _source_index(g[..., 0], w, point_padding, align_corners)
    iy, mult_y = _source_index(g[..., 1], h, point_padding, align_corners)
    ix, iy, mult_x, mult_y = (t.reshape(n, oh * ow, 1) for t in (ix, iy, mult_x, mult_y))
    go = grad_output.to(acc).permute(0, 2, 3, 1).reshape(n, oh * ow, 1, c)
    hw = h * w
    if interpolation_mode == NEAREST:
        flat, valid = _corners(torch.round(ix), torch.round(iy), h, w, hw)   # half to even
        weights = None
    elif interpolation_mode == BILINEAR:
        x0, y0 = torch.floor(ix), torch.floor(iy)
        x1, y1 = x0 + 1, y0 + 1
        cx = torch.cat([x0, x1, x0, x1], dim=-1)                  # nw, ne, sw, se
        cy = torch.cat([y0, y0, y1, y1], dim=-1)
        flat, valid = _corners(cx, cy, h, w, hw)
        weights = torch.cat([(x1 - ix) * (y1 - iy), (ix - x0) * (y1 - iy),
                             (x1 - ix) * (iy - y0), (ix - x0) * (iy - y0)], dim=-1)
        # d weight / d ix and d weight / d iy per corner
        dx = torch.cat([-(y1 - iy), y1 - iy, -(iy - y0), iy - y0], dim=-1)
        dy = torch.cat([-(x1 - ix), -(ix - x0), x1 - ix, ix - x0], dim=-1)
    else:
        # 16 taps, x index i outer and y index j inner (torch's loop order).
        x0, y0 = torch.floor(ix), torch.floor(iy)
        xc, xg = _cubic(ix - x0)
        yc, yg = _cubic(iy - y0)
        taps = [(i, j) for i in range(4) for j in range(4)]
        cx = torch.cat([_tap_coordinates(x0 - 1 + i, w, padding_mode, align_corners)
                        for i, _ in taps], dim=-1)
        cy = torch.cat([_tap_coordinates(y0 - 1 + j, h, padding_mode, align_corners)
                        for _, j in taps], dim=-1)
        flat, valid = _corners(torch.trunc(cx), torch.trunc(cy), h, w, hw)
        weights = torch.cat([xc[i] * yc[j] for i, j in taps], dim=-1)
        dx = torch.cat([-(xg[i] * yc[j]) for i, j in taps], dim=-1)
        dy = torch.cat([-(yg[j] * xc[i]) for i, j in taps], dim=-1)
    k = flat.shape[-1]
    grad_input = grad_grid = None
    if output_mask[0]:
        src = go if weights is None else weights.unsqueeze(-1) * go          # [n, ohw, k, c]
        src = src.expand(n, oh * ow, k, c).reshape(-1, c)
        rows = (flat + torch.arange(n, device=flat.device).reshape(n, 1, 1) * (hw + 1))
        out = torch.zeros((n * (hw + 1), c), dtype=acc, device=input.device)
        _ops._index_add_into(out, 0, rows.reshape(-1), src, 1.0, level)
        grad_input = out.reshape(n, hw + 1, c)[:, :hw].reshape(n, h, w, c).permute(
            0, 3, 1, 2).to(dtype, memory_format=torch.contiguous_format)
    if output_mask[1]:
        if weights is None:                     # nearest: the gradient is zero almost everywhere
            grad_grid = torch.zeros_like(grid, memory_format=torch.contiguous_format)
        else:
            # Values at the corners, channels last, 0 outside (the spare row).
            pixels = torch.cat([input.to(acc).permute(0, 2, 3, 1).reshape(n, hw, c),
                                input.new_zeros((n, 1, c), dtype=acc)], dim=1)
            vals = torch.gather(pixels, 1, flat.reshape(n, -1, 1).expand(n, oh * ow * k, c))
            vals = vals.reshape(n, oh * ow, k, c)
            parts = []
            for d, mult in ((dx, mult_x), (dy, mult_y)):
                terms = vals * d.unsqueeze(-1) * go
                if interpolation_mode == BILINEAR:     # torch skips corners outside the input
                    terms = torch.where(valid.unsqueeze(-1), terms,
                                        torch.zeros((), dtype=acc, device=input.device))
                # Per output position, over channels then corners (torch's loop order).
                total = _ops.sum(terms.transpose(2, 3).reshape(n, oh * ow, c * k), 2,
                                 level=level)
                parts.append(mult.reshape(n, oh * ow) * total)
            grad_grid = torch.stack(parts, dim=-1).reshape(n, oh, ow, 2).to(grid.dtype)
    return grad_input, grad_grid
