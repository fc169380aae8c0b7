// The BM=128, BN=64 instantiations, in a file of their own so they compile in parallel.
#include "sgemm_impl.cuh"

SGEMM_INSTANCE(128, 64)
