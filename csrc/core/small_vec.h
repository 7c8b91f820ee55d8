// A vector that keeps its first N elements inline, so the common small case (a node's one or two
// edges, saved tensors, gradients) needs no heap allocation. Past N, the rest go to a heap block.
// Its own bookkeeping is 16 bytes (a node holds two of these, and node size decides its arena class).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <new>
#include <utility>

namespace fg {

template <class T, size_t N>
class SmallVec {
 public:
  SmallVec() = default;
  SmallVec(std::initializer_list<T> items) {
    for (const T& item : items) push_back(item);
  }
  explicit SmallVec(size_t n) { resize(n); }
  SmallVec(const SmallVec& other) {
    for (const T& item : other) push_back(item);
  }
  SmallVec(SmallVec&& other) noexcept { *this = std::move(other); }
  SmallVec& operator=(SmallVec&& other) noexcept {
    clear();
    for (T& item : other) push_back(std::move(item));
    other.clear();
    return *this;
  }
  SmallVec& operator=(const SmallVec& other) {
    if (this != &other) {
      clear();
      for (const T& item : other) push_back(item);
    }
    return *this;
  }
  ~SmallVec() {
    clear();
    if (heap_) std::allocator<T>().deallocate(heap_, heap_capacity_);
  }

  void push_back(T item) {
    if (size_ < N) {
      new (&inline_slot(size_)) T(std::move(item));
    } else {
      if (size_ - N == heap_capacity_) grow_heap();
      new (heap_ + (size_ - N)) T(std::move(item));
    }
    ++size_;
  }
  void resize(size_t n) {
    while (size_ < n) push_back(T());
  }
  void clear() {  // keeps the heap block for reuse
    for (size_t i = 0; i < size_; ++i) (*this)[i].~T();
    size_ = 0;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return i < N ? inline_slot(i) : heap_[i - N]; }
  const T& operator[](size_t i) const { return i < N ? inline_slot(i) : heap_[i - N]; }

  class iterator {
   public:
    iterator(SmallVec* v, size_t i) : v_(v), i_(i) {}
    T& operator*() const { return (*v_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const iterator& o) const { return i_ != o.i_; }
   private:
    SmallVec* v_;
    size_t i_;
  };
  iterator begin() { return {this, 0}; }
  iterator end() { return {this, size_}; }
  iterator begin() const { return {const_cast<SmallVec*>(this), 0}; }
  iterator end() const { return {const_cast<SmallVec*>(this), size_}; }

 private:
  T& inline_slot(size_t i) { return reinterpret_cast<T*>(storage_)[i]; }
  const T& inline_slot(size_t i) const { return reinterpret_cast<const T*>(storage_)[i]; }
  void grow_heap() {
    uint32_t capacity = heap_capacity_ ? 2 * heap_capacity_ : 4;
    T* bigger = std::allocator<T>().allocate(capacity);
    for (uint32_t i = 0; i < size_ - N; ++i) {
      new (bigger + i) T(std::move(heap_[i]));
      heap_[i].~T();
    }
    if (heap_) std::allocator<T>().deallocate(heap_, heap_capacity_);
    heap_ = bigger;
    heap_capacity_ = capacity;
  }

  alignas(T) unsigned char storage_[N * sizeof(T)];
  T* heap_ = nullptr;  // elements N.. (room for heap_capacity_)
  uint32_t size_ = 0;
  uint32_t heap_capacity_ = 0;
};

}  // namespace fg
