// The NCCL communicator (library samebits_nccl, built with the CUDA backend when NCCL is found):
// one rank of a clique, collectives on device buffers, ordered on the caller's stream.
#include "samebits/distributed.hpp"
#include "samebits/errors.hpp"

#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

namespace samebits {

namespace {

void check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess)
    throw Error(fmt::format("NCCL communicator: {} failed: {}", what, ncclGetErrorString(rc)));
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
  case DType::f32:
    return ncclFloat32;
  case DType::f64:
    return ncclFloat64;
  case DType::i64:
    return ncclInt64;
  default:
    throw InvalidArgument(fmt::format("NCCL communicator: no NCCL type for {}", to_string(d)));
  }
}

cudaStream_t cuda(Stream s) {
  return static_cast<cudaStream_t>(s.handle);
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(const std::string& id, int rank, int size, int cuda_device)
      : rank_(rank), size_(size), device_(cuda_device) {
    if (id.size() != sizeof(ncclUniqueId))
      throw InvalidArgument(fmt::format("make_nccl_communicator: the unique id has {} bytes, "
                                        "expected {}",
                                        id.size(), sizeof(ncclUniqueId)));
    // NVLink SHARP (multicast) is left off: the machines lent do not support it.
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    ncclUniqueId uid;
    std::memcpy(&uid, id.data(), sizeof uid);
    if (cudaSetDevice(cuda_device) != cudaSuccess)
      throw Error(fmt::format("make_nccl_communicator: cannot select CUDA device {}", cuda_device));
    check(ncclCommInitRank(&comm_, size, uid, rank), "ncclCommInitRank");
  }
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::cuda(device_); }
  void sum_i64(std::int64_t* data, std::int64_t n, Stream s) override {
    check(ncclAllReduce(data, data, static_cast<size_t>(n), ncclInt64, ncclSum, comm_, cuda(s)),
          "ncclAllReduce (int64 sum)");
  }
  void max_f64(double* data, std::int64_t n, Stream s) override {
    check(ncclAllReduce(data, data, static_cast<size_t>(n), ncclFloat64, ncclMax, comm_, cuda(s)),
          "ncclAllReduce (max)");
  }
  void sum_float(void* data, std::int64_t n, DType dtype, Stream s) override {
    check(ncclAllReduce(data, data, static_cast<size_t>(n), nccl_type(dtype), ncclSum, comm_,
                        cuda(s)),
          "ncclAllReduce (float sum)");
  }
  void all_to_all(const void* send, void* recv, std::int64_t n, DType dtype, Stream s) override {
    const auto bytes = static_cast<std::size_t>(n) * size_of(dtype);
    check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < size_; ++r) {
      check(ncclSend(static_cast<const char*>(send) + r * bytes, static_cast<size_t>(n),
                     nccl_type(dtype), r, comm_, cuda(s)),
            "ncclSend");
      check(ncclRecv(static_cast<char*>(recv) + r * bytes, static_cast<size_t>(n), nccl_type(dtype),
                     r, comm_, cuda(s)),
            "ncclRecv");
    }
    check(ncclGroupEnd(), "ncclGroupEnd");
  }
  void all_gather(const void* send, void* recv, std::int64_t n, DType dtype, Stream s) override {
    check(ncclAllGather(send, recv, static_cast<size_t>(n), nccl_type(dtype), comm_, cuda(s)),
          "ncclAllGather");
  }

private:
  int rank_, size_, device_;
  ncclComm_t comm_ = nullptr;
};

} // namespace

std::string nccl_unique_id() {
  ncclUniqueId uid;
  check(ncclGetUniqueId(&uid), "ncclGetUniqueId");
  return std::string(reinterpret_cast<const char*>(&uid), sizeof uid);
}

std::unique_ptr<Communicator> make_nccl_communicator(const std::string& unique_id, int rank,
                                                     int size, int cuda_device) {
  return std::make_unique<NcclCommunicator>(unique_id, rank, size, cuda_device);
}

} // namespace samebits
