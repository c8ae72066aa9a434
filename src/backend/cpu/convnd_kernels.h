// Raw-pointer kernels for convolutions over 1 to 3 spatial dims, 3-D and
// adaptive pooling, and im2col/col2im, for the CPU backend (contiguous,
// channels first). The 2-D float convolutions keep their tuned kernels
// (conv_kernels.h); these serve 3-D, integer dtypes and F.unfold/F.fold.
// Fewer than 3 spatial dims are given as leading size-1 dims (in = k = out =
// stride = dil = 1, pad = 0), so one code path covers every rank.
#pragma once
#include <array>
#include <cstdint>

namespace kiln::cpu {

// x [N, C_in, D, H, W], weight [C_out, C_in/groups, kD, kH, kW],
// out [N, C_out, oD, oH, oW] (out as the caller computed it).
struct ConvNdParams {
  int64_t N, C_in, C_out, groups;
  std::array<int64_t, 3> in, k, stride, pad, dil, out;
};

// Transposed convolutions use these as conv_kernels.h's Note [Transposed convolution] says.
template <class T>
void convnd_forward(const ConvNdParams& p, const T* input, const T* weight, const T* bias, T* output);
// grad_input [N, C_in, *in] (overwritten).
template <class T>
void convnd_backward_input(const ConvNdParams& p, const T* grad_output, const T* weight, T* grad_input);
// grad_weight [C_out, C_in/groups, *k] (overwritten), summed over the batch.
template <class T>
void convnd_backward_weight(const ConvNdParams& p, const T* grad_output, const T* input, T* grad_weight);

// F.unfold: cols [N, C*kH*kW, oH*oW] from x [N, C, H, W] (groups = 1, C_out unused).
template <class T>
void im2col_nd(const ConvNdParams& p, const T* input, T* cols);
// F.fold: out [N, C, H, W] (overwritten) = sum of the blocks of cols.
template <class T>
void col2im_nd(const ConvNdParams& p, const T* cols, T* output);

// A 3-D pooling window over `planes` planes of in[0] x in[1] x in[2].
struct Pool3dParams {
  int64_t planes;
  std::array<int64_t, 3> in, k, stride, pad, dil, out;
  bool count_include_pad;    // avg pool only
  int64_t divisor_override;  // avg pool only; 0 = none
};
// indices: the flat (d*H + h)*W + w position of each max in its plane; NaN wins (the last one), as torch.
template <class T>
void max_pool3d_forward(const Pool3dParams& p, const T* in, T* out, int64_t* indices);
// Integer sums divide with truncation, as torch's int64 avg pools.
template <class T>
void avg_pool3d_forward(const Pool3dParams& p, const T* in, T* out);
template <class T>
void avg_pool3d_backward(const Pool3dParams& p, const T* grad_out, T* grad_in);
// torch's adaptive windows: [floor(i*In/Out), ceil((i+1)*In/Out)) per dim.
template <class T>
void adaptive_max_pool3d_forward(const Pool3dParams& p, const T* in, T* out, int64_t* indices);

}  // namespace kiln::cpu
