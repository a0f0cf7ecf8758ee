// A first-in first-out queue on one ring buffer: a stream's queued operations, and the labels of
// the latest operations (sim/sim_device.h).
//
// std::deque allocates a node per few large elements, so a simulator enqueuing and running
// hundreds of thousands of operations spent a tenth of its time in malloc and free. Here the slots
// are reused: pushing moves into a slot freed by an earlier pop, and the buffer only grows (to
// twice its size, when full), so a stream in steady state allocates nothing. A popped element
// stays in its slot until a push moves a new one in (or clear() or the queue's end): what it holds
// is bounded by the most elements the queue ever held at once.
#ifndef DMALAB_SIM_FIFO_H_
#define DMALAB_SIM_FIFO_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace dmalab {

template <typename T>
class Fifo {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  // The i-th element from the front; i is below size().
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }

  void push_back(T&& value) {
    if (size_ == slots_.size()) Grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(value);
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }
  // Empty, and every element destroyed.
  void clear() {
    slots_.clear();
    head_ = size_ = 0;
  }

 private:
  // Twice the slots (at least 4; always a power of two, so an index wraps with a mask), the
  // elements moved to the front in order.
  void Grow() {
    std::vector<T> bigger(slots_.empty() ? 4 : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) {
      bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    }
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;  // the front's slot
  size_t size_ = 0;
};

}  // namespace dmalab

#endif  // DMALAB_SIM_FIFO_H_
