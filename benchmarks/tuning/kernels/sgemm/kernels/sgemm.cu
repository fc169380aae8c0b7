// Picks the (BM, BN) family; each family's instantiations live in sgemm_<BM>x<BN>.cu.
#include <cuda_runtime.h>

#define SGEMM_DECLARE(BM_, BN_)                                                                            \
  extern "C" cudaError_t sgemm_##BM_##x##BN_(int bk, int tm, int tn, int M, int N, int K, const float* A,  \
                                             const float* B, float* C, cudaStream_t stream);
SGEMM_DECLARE(32, 32)
SGEMM_DECLARE(32, 64)
SGEMM_DECLARE(32, 128)
SGEMM_DECLARE(64, 32)
SGEMM_DECLARE(64, 64)
SGEMM_DECLARE(64, 128)
SGEMM_DECLARE(128, 32)
SGEMM_DECLARE(128, 64)
SGEMM_DECLARE(128, 128)

extern "C" cudaError_t sgemm_launch(const float* A, const float* B, float* C, int M, int N, int K, int bm, int bn,
                                    int bk, int tm, int tn, cudaStream_t stream) {
#define SGEMM_CASE(BM_, BN_) \
  if (bm == BM_ && bn == BN_) return sgemm_##BM_##x##BN_(bk, tm, tn, M, N, K, A, B, C, stream);
  SGEMM_CASE(32, 32)
  SGEMM_CASE(32, 64)
  SGEMM_CASE(32, 128)
  SGEMM_CASE(64, 32)
  SGEMM_CASE(64, 64)
  SGEMM_CASE(64, 128)
  SGEMM_CASE(128, 32)
  SGEMM_CASE(128, 64)
  SGEMM_CASE(128, 128)
#undef SGEMM_CASE
  return cudaErrorInvalidValue;
}
