// Raw-pointer convolution and pooling kernels for the CPU backend (float and
// double, NCHW, contiguous). 1-D convolution is the H == 1 case of these.
//
// Note [Transposed convolution]
// conv_transpose2d needs no kernels of its own. With the transposed conv's
// input x [N, C_in_t, H, W], weight w [C_in_t, C_out_t/groups, kH, kW] and
// output y [N, C_out_t, H_t, W_t], build Conv2dParams for the *direct* conv
// that maps y-shaped tensors to x-shaped ones:
//   C_in = C_out_t, H = H_t, W = W_t, C_out = C_in_t, same kernel, stride,
//   padding, dilation and groups,
// where H_t = (H - 1)*stride_h - 2*pad_h + dil_h*(kH - 1) + output_padding_h + 1
// (output_padding < stride keeps that conv's H_out() == H). Then
//   y          = conv2d_backward_input(p, grad_output = x, weight = w)   (+ bias per channel)
//   grad_x     = conv2d_forward(p, input = grad_y, weight = w, bias = nullptr)
//   grad_w     = conv2d_backward_weight(p, grad_output = x, input = grad_y)
// i.e. the weight gradient swaps the roles of "input" and "grad_output".
#pragma once
#include <cstdint>

namespace kiln::cpu {

// Output planes of at most this many pixels batch their samples into one GEMM per pass (Note
// [Small planes batch samples], conv_kernels.cpp); oneDNN's routing sends such passes here.
inline constexpr int64_t kBatchedConvMaxPlane = 16;

struct Conv2dParams {
  int64_t N, C_in, H, W, C_out, kH, kW;
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int64_t groups;
  int64_t H_out() const;
  int64_t W_out() const;
};

// output [N, C_out, H_out, W_out] = conv(input [N, C_in, H, W],
// weight [C_out, C_in/groups, kH, kW]) + bias [C_out] (bias may be null).
template <class T>
void conv2d_forward(const Conv2dParams& p, const T* input, const T* weight, const T* bias,
                    T* output);
// grad_input [N, C_in, H, W] (overwritten) from grad_output [N, C_out, H_out, W_out].
template <class T>
void conv2d_backward_input(const Conv2dParams& p, const T* grad_output, const T* weight,
                           T* grad_input);
// grad_weight [C_out, C_in/groups, kH, kW] (overwritten), summed over the batch.
template <class T>
void conv2d_backward_weight(const Conv2dParams& p, const T* grad_output, const T* input,
                            T* grad_weight);

// Pooling with PyTorch's output-size rule: floor((H + 2*pad - dil*(k-1) - 1
// [+ stride-1 if ceil_mode]) / stride) + 1, and in ceil_mode the last window
// must start inside the input or the left padding. Avg pool requires dil == 1
// (as PyTorch's avg_pool2d has no dilation).
struct Pool2dParams {
  int64_t N, C, H, W, kH, kW;
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  bool ceil_mode;
  bool count_include_pad;    // avg pool only
  int64_t divisor_override;  // avg pool only; 0 = none
  int64_t H_out() const;
  int64_t W_out() const;
};

// out [N, C, H_out, W_out]; indices (same shape) hold the flat h*W + w
// position of the max within its input plane. NaN wins over any number (the
// last NaN of a window is kept), as in PyTorch.
template <class T>
void max_pool2d_forward(const Pool2dParams& p, const T* in, T* out, int64_t* indices);
// grad_in [N, C, H, W] (overwritten): each grad_out element goes to its index.
template <class T>
void max_pool2d_backward(const Pool2dParams& p, const T* grad_out, const int64_t* indices,
                         T* grad_in);
template <class T>
void avg_pool2d_forward(const Pool2dParams& p, const T* in, T* out);
// grad_in [N, C, H, W] (overwritten).
template <class T>
void avg_pool2d_backward(const Pool2dParams& p, const T* grad_out, T* grad_in);

}  // namespace kiln::cpu
