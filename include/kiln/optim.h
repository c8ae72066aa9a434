// kiln::optim — optimizers, learning-rate schedulers, and gradient clipping (kiln::nn::utils).
#pragma once
#include "kiln/nn/clip_grad.h"
#include "kiln/optim/adagrad.h"
#include "kiln/optim/adam.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/grad_scaler.h"
#include "kiln/optim/lr_scheduler.h"
#include "kiln/optim/optimizer.h"
#include "kiln/optim/rmsprop.h"
#include "kiln/optim/sgd.h"
