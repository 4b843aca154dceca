// The MPI communicator (library samebits_mpi): MPI_COMM_WORLD collectives on CPU buffers.
#include "samebits/distributed.hpp"
#include "samebits/errors.hpp"

#include <fmt/format.h>
#include <limits>
#include <mpi.h>

namespace samebits {

namespace {

MPI_Datatype mpi_type(DType d) {
  switch (d) {
  case DType::f32:
    return MPI_FLOAT;
  case DType::f64:
    return MPI_DOUBLE;
  case DType::i64:
    return MPI_INT64_T;
  default:
    throw InvalidArgument(fmt::format("MPI communicator: no MPI type for {}", to_string(d)));
  }
}

int count(std::int64_t n) {
  if (n > std::numeric_limits<int>::max())
    throw InvalidArgument(fmt::format("MPI communicator: {} elements exceed MPI's int count", n));
  return static_cast<int>(n);
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS)
    throw Error(fmt::format("MPI communicator: {} failed (error {})", what, rc));
}

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator() {
    int ok = 0;
    MPI_Initialized(&ok);
    if (!ok)
      throw InvalidArgument("make_mpi_communicator: call MPI_Init first");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::cpu(); }
  void sum_i64(std::int64_t* data, std::int64_t n, Stream) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, count(n), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce (int64 sum)");
  }
  void max_f64(double* data, std::int64_t n, Stream) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, count(n), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
          "MPI_Allreduce (max)");
  }
  void sum_float(void* data, std::int64_t n, DType dtype, Stream) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, count(n), mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce (float sum)");
  }
  void all_to_all(const void* send, void* recv, std::int64_t n, DType dtype, Stream) override {
    check(MPI_Alltoall(send, count(n), mpi_type(dtype), recv, count(n), mpi_type(dtype),
                       MPI_COMM_WORLD),
          "MPI_Alltoall");
  }
  void all_gather(const void* send, void* recv, std::int64_t n, DType dtype, Stream) override {
    check(MPI_Allgather(send, count(n), mpi_type(dtype), recv, count(n), mpi_type(dtype),
                        MPI_COMM_WORLD),
          "MPI_Allgather");
  }

private:
  int rank_ = 0, size_ = 1;
};

} // namespace

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

} // namespace samebits
