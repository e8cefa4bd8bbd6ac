// The NCCL communicator maps every type and reduction of the Communicator interface.
#include <gtest/gtest.h>

#include "runtime/cuda/nccl_communicator.h"

using namespace trident::comm;

TEST(NcclTypes, every_interface_type_has_its_nccl_type) {
  EXPECT_EQ(nccl_type(DType::F32), ncclFloat32);
  EXPECT_EQ(nccl_type(DType::BF16), ncclBfloat16);
  EXPECT_EQ(nccl_type(DType::F16), ncclFloat16);
  EXPECT_EQ(nccl_type(DType::I32), ncclInt32);
  EXPECT_EQ(nccl_type(DType::I64), ncclInt64);
  EXPECT_EQ(nccl_type(DType::U8), ncclUint8);
}

TEST(NcclTypes, every_reduction_has_its_nccl_op) {
  EXPECT_EQ(nccl_op(ReduceOp::Sum), ncclSum);
  EXPECT_EQ(nccl_op(ReduceOp::Max), ncclMax);
  EXPECT_EQ(nccl_op(ReduceOp::Min), ncclMin);
}
