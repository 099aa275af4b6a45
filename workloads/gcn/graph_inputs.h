// What the GCN makes of a citation graph before training: the Planetoid split (Yang et al. 2016) drawn
// reproducibly, the normalised adjacency and the row-normalised features of Kipf & Welling's reference.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace dtrain {

// The Planetoid split: `per_class` labelled training nodes of each class, then `val` and `test` nodes
// from the rest, all drawn from one permutation seeded by `seed` (the same split on every rank and
// run). Throws DataError when a class has fewer than `per_class` nodes or too few nodes remain.
struct NodeSplit {
  at::Tensor train, val, test;  // int64 node indices, ascending
};
NodeSplit planetoid_split(const at::Tensor& labels, int64_t num_classes, int64_t per_class, int64_t val, int64_t test,
                          uint64_t seed);

// D^-1/2 (A + I) D^-1/2 as a coalesced sparse COO float32 [N, N] tensor, where A is the symmetric 0/1
// adjacency of `edges` (direction and duplicates ignored) and D the degrees of A + I (Kipf & Welling).
at::Tensor normalized_adjacency(const at::Tensor& edges, int64_t num_nodes);

// Rows scaled to sum 1 (rows of zeros stay zero): the GCN reference's feature preprocessing.
at::Tensor row_normalized(const at::Tensor& features);

}  // namespace dtrain
