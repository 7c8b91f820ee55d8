// Dims: the sizes or strides of a tensor. Almost every tensor has at most six dims, so they are
// kept inline and making a tensor, a view or a broadcast shape costs no heap allocation; longer
// ones move to the heap. Contiguous, with the parts of std::vector's interface the core uses.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <utility>
#include <vector>

namespace fg {

class Dims {
 public:
  using value_type = int64_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;

  Dims() = default;
  explicit Dims(size_t n, int64_t value = 0) { assign(n, value); }
  Dims(std::initializer_list<int64_t> items) { assign(items.begin(), items.end()); }
  template <class It, class = decltype(*std::declval<It>())>
  Dims(It first, It last) {
    assign(first, last);
  }
  Dims(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit, like the alias it replaced
  Dims(const Dims& other) { assign(other.begin(), other.end()); }
  Dims(Dims&& other) noexcept { steal(other); }
  Dims& operator=(const Dims& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Dims& operator=(Dims&& other) noexcept {
    if (this != &other) {
      release();
      steal(other);
    }
    return *this;
  }
  ~Dims() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return data_; }
  const int64_t* data() const { return data_; }
  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  std::reverse_iterator<iterator> rbegin() { return std::reverse_iterator<iterator>(end()); }
  std::reverse_iterator<iterator> rend() { return std::reverse_iterator<iterator>(begin()); }
  int64_t& operator[](size_t i) { return data_[i]; }
  const int64_t& operator[](size_t i) const { return data_[i]; }
  int64_t& front() { return data_[0]; }
  int64_t front() const { return data_[0]; }
  int64_t& back() { return data_[size_ - 1]; }
  int64_t back() const { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n <= capacity_) return;
    size_t grown = std::max(n, 2 * capacity_);
    auto* heap = new int64_t[grown];
    std::memcpy(heap, data_, size_ * sizeof(int64_t));
    release();
    data_ = heap;
    capacity_ = grown;
  }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void clear() { size_ = 0; }
  void push_back(int64_t v) {
    reserve(size_ + 1);
    data_[size_++] = v;
  }
  void pop_back() { --size_; }
  void assign(size_t n, int64_t value) {
    size_ = 0;
    resize(n, value);
  }
  template <class It>
  void assign(It first, It last) {
    size_ = 0;
    reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) data_[size_++] = static_cast<int64_t>(*first);
  }
  iterator insert(const_iterator pos, int64_t v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t count, int64_t v) {
    size_t at = static_cast<size_t>(pos - data_);
    reserve(size_ + count);
    std::memmove(data_ + at + count, data_ + at, (size_ - at) * sizeof(int64_t));
    std::fill(data_ + at, data_ + at + count, v);
    size_ += count;
    return data_ + at;
  }
  template <class It, class = decltype(*std::declval<It>())>
  iterator insert(const_iterator pos, It first, It last) {
    size_t at = static_cast<size_t>(pos - data_), count = static_cast<size_t>(std::distance(first, last));
    Dims tail(data_ + at, data_ + size_);  // the inserted range may point into *this
    Dims items(first, last);
    resize(at);
    reserve(at + count + tail.size());
    for (int64_t v : items) data_[size_++] = v;
    for (int64_t v : tail) data_[size_++] = v;
    return data_ + at;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    size_t at = static_cast<size_t>(first - data_), count = static_cast<size_t>(last - first);
    std::memmove(data_ + at, data_ + at + count, (size_ - at - count) * sizeof(int64_t));
    size_ -= count;
    return data_ + at;
  }

  friend bool operator==(const Dims& a, const Dims& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }

 private:
  static constexpr size_t kInline = 6;
  bool on_heap() const { return data_ != inline_; }
  void release() {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    capacity_ = kInline;
  }
  // Takes other's elements, leaving it empty (and inline).
  void steal(Dims& other) {
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = kInline;
    } else {
      std::memcpy(inline_, other.inline_, other.size_ * sizeof(int64_t));
    }
    size_ = other.size_;
    other.size_ = 0;
  }

  int64_t inline_[kInline];
  int64_t* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = kInline;
};

}  // namespace fg
