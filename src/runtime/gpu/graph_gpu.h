// The GPU side of hipformers/runtime/graph.h, callable from plain C++.
#pragma once

#include <functional>

namespace hipformers::gpu {

// A captured stream graph and its executable instance on one device.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&& other) noexcept { swap(other); }
  Graph& operator=(Graph&& other) noexcept {
    swap(other);
    return *this;
  }
  void capture(int device, const std::function<void()>& enqueue);
  void replay() const;

 private:
  void swap(Graph& other) noexcept;
  int device_ = -1;
  void* graph_ = nullptr;
  void* exec_ = nullptr;
};

}  // namespace hipformers::gpu
