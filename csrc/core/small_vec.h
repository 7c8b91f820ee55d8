// A vector that keeps its first N elements inline, so the common small case (a node's one or two
// edges, its one or two gradients) needs no heap allocation.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <new>
#include <utility>
#include <vector>

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
  ~SmallVec() { clear(); }

  void push_back(T item) {
    if (size_ < N) new (&inline_slot(size_)) T(std::move(item));
    else heap_.push_back(std::move(item));
    ++size_;
  }
  void resize(size_t n) {
    while (size_ < n) push_back(T());
  }
  void clear() {
    for (size_t i = 0; i < size_ && i < N; ++i) inline_slot(i).~T();
    heap_.clear();
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
  alignas(T) unsigned char storage_[N * sizeof(T)];
  size_t size_ = 0;
  std::vector<T> heap_;
};

}  // namespace fg
