// The BM=64, BN=32 instantiations, in a file of their own so they compile in parallel.
#include "sgemm_impl.cuh"

SGEMM_INSTANCE(64, 32)
