// SmallVector<T, N>: a vector that keeps up to N elements inline, so the
// short lists on the op call path (sizes, strides, loop dims) need no heap
// allocation. It has std::vector's interface and
// converts to and from std::vector<T>, so code written for one compiles with
// the other. T must be trivially copyable (it is copied with memcpy).
#pragma once
#include <algorithm>
#include <compare>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kiln/array_ref.h"

namespace kiln {

template <class T, uint32_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector copies its elements with memcpy");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVector() = default;
  explicit SmallVector(size_t n) { resize(n); }
  SmallVector(size_t n, const T& v) { assign(n, v); }
  SmallVector(std::initializer_list<T> l) { assign(l.begin(), l.end()); }
  template <class It>
  requires(!std::is_integral_v<It>) SmallVector(It first, It last) { assign(first, last); }
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT: as std::vector
  explicit SmallVector(ArrayRef<T> v) { assign(v.begin(), v.end()); }
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { take(o); }
  ~SmallVector() { release(); }

  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> l) {
    assign(l.begin(), l.end());
    return *this;
  }
  SmallVector& operator=(const std::vector<T>& v) {
    assign(v.begin(), v.end());
    return *this;
  }
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: as std::vector

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  const_iterator cbegin() const { return data_; }
  const_iterator cend() const { return data_ + size_; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n > cap_) grow_to(n);
  }
  void clear() { size_ = 0; }
  void push_back(const T& v) {
    if (size_ == cap_) {
      T copy = v;  // v may live in this vector
      grow_to(cap_ * 2);
      data_[size_++] = copy;
    } else {
      data_[size_++] = v;
    }
  }
  template <class... A>
  T& emplace_back(A&&... a) {
    push_back(T(std::forward<A>(a)...));
    return back();
  }
  void pop_back() { --size_; }
  void resize(size_t n) { resize(n, T()); }
  void resize(size_t n, const T& v) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = v;
    size_ = static_cast<uint32_t>(n);
  }
  void assign(size_t n, const T& v) {
    clear();
    resize(n, v);
  }
  template <class It>
  requires(!std::is_integral_v<It>) void assign(It first, It last) {
    clear();
    if constexpr (std::is_base_of_v<std::forward_iterator_tag, typename std::iterator_traits<It>::iterator_category>)
      reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(*first);
  }
  void assign(std::initializer_list<T> l) { assign(l.begin(), l.end()); }

  iterator insert(const_iterator pos, const T& v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t n, const T& v) {
    size_t at = static_cast<size_t>(pos - data_);
    T copy = v;
    make_gap(at, n);
    for (size_t i = 0; i < n; ++i) data_[at + i] = copy;
    return data_ + at;
  }
  template <class It>
  requires(!std::is_integral_v<It>) iterator insert(const_iterator pos, It first, It last) {
    size_t at = static_cast<size_t>(pos - data_);
    SmallVector tmp(first, last);  // the range may alias this vector
    make_gap(at, tmp.size());
    if (!tmp.empty()) std::memcpy(data_ + at, tmp.data(), tmp.size() * sizeof(T));
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> l) { return insert(pos, l.begin(), l.end()); }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    size_t a = static_cast<size_t>(first - data_), b = static_cast<size_t>(last - data_);
    if (b > a) std::memmove(data_ + a, data_ + b, (size_ - b) * sizeof(T));
    size_ -= static_cast<uint32_t>(b - a);
    return data_ + a;
  }
  void swap(SmallVector& o) noexcept {
    SmallVector t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend auto operator<=>(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool is_inline() const { return data_ == inline_; }
  void release() {
    if (!is_inline()) std::free(data_);
    data_ = inline_;
    size_ = 0;
    cap_ = N;
  }
  // Leaves o empty and inline.
  void take(SmallVector& o) {
    if (o.is_inline()) {
      data_ = inline_;
      cap_ = N;
      if (o.size_) std::memcpy(inline_, o.inline_, o.size_ * sizeof(T));
    } else {
      data_ = o.data_;
      cap_ = o.cap_;
    }
    size_ = o.size_;
    o.data_ = o.inline_;
    o.size_ = 0;
    o.cap_ = N;
  }
  void grow_to(size_t n) {
    n = std::max<size_t>({n, size_t{cap_} * 2, size_t{1}});
    T* p = static_cast<T*>(std::malloc(n * sizeof(T)));
    if (!p) throw std::bad_alloc();
    if (size_) std::memcpy(p, data_, size_ * sizeof(T));
    if (!is_inline()) std::free(data_);
    data_ = p;
    cap_ = static_cast<uint32_t>(n);
  }
  void make_gap(size_t at, size_t n) {
    reserve(size_ + n);
    if (at < size_) std::memmove(data_ + at + n, data_ + at, (size_ - at) * sizeof(T));
    size_ += static_cast<uint32_t>(n);
  }

  T* data_ = inline_;
  uint32_t size_ = 0;
  uint32_t cap_ = N;
  T inline_[N];
};

}  // namespace kiln
