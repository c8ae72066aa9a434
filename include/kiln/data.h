// Data loading, as torch.utils.data: Dataset, TensorDataset, Subset, random_split, the samplers
// and DataLoader (include/kiln/data/*.h).
#pragma once
#include "kiln/data/dataloader.h"
#include "kiln/data/dataset.h"
#include "kiln/data/sampler.h"
