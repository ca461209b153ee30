#include "leanseq/decode/constraints.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "leanseq/core/error.h"

namespace leanseq::decode {

ConstraintOrder parse_constraint_order(const std::string& name) {
  if (name == "ordered") return ConstraintOrder::ordered;
  if (name == "unordered") return ConstraintOrder::unordered;
  throw ConfigError("ordered or unordered, got '" + name + "'");
}

ConstraintTracker::ConstraintTracker(const Constraints& constraints, ConstraintOrder order) : order_(order) {
  std::set<int64_t> distinct;
  int64_t total = 0;
  for (const auto& c : constraints) {
    if (c.empty()) throw DataError("a constraint has no tokens");
    total += static_cast<int64_t>(c.size());
    distinct.insert(c.begin(), c.end());
  }
  if (total > kMaxConstraintTokens) {
    throw DataError("constraints of " + std::to_string(total) + " tokens, more than the " +
                    std::to_string(kMaxConstraintTokens) + " a sentence may have");
  }
  key_tokens_ = order == ConstraintOrder::ordered ? total : static_cast<int64_t>(distinct.size());
  if (order == ConstraintOrder::ordered) {
    for (const auto& c : constraints) {
      for (size_t i = 0; i < c.size(); ++i) {
        sequence_.push_back(c[i]);
        ends_.push_back(i + 1 == c.size());
      }
    }
    return;
  }
  nodes_.emplace_back();  // the root
  for (const auto& c : constraints) {
    int64_t node = 0;
    for (int64_t token : c) {
      int64_t next = child(node, token);
      if (next < 0) {
        next = static_cast<int64_t>(nodes_.size());
        nodes_[static_cast<size_t>(node)].children.emplace_back(token, next);
        Node n;
        n.token = token;
        n.parent = node;
        nodes_.push_back(n);
      }
      node = next;
    }
    nodes_[static_cast<size_t>(node)].terminal += 1;
    for (int64_t n = node; n >= 0; n = nodes_[static_cast<size_t>(n)].parent) nodes_[static_cast<size_t>(n)].num_constraints += 1;
  }
}

int64_t ConstraintTracker::child(int64_t node, int64_t token) const {
  for (const auto& [t, n] : nodes_[static_cast<size_t>(node)].children) {
    if (t == token) return n;
  }
  return -1;
}

ConstraintTracker::State ConstraintTracker::start() const {
  State s;
  if (order_ == ConstraintOrder::unordered) {
    s.at = 0;
    s.generated.assign(nodes_.size(), 0);
    s.completed.assign(nodes_.size(), 0);
  }
  return s;
}

int32_t ConstraintTracker::completed_count(const State& s) const {
  const auto& n = nodes_[static_cast<size_t>(s.at)];
  // The node reached may end a constraint that a next token would complete: it counts already.
  const int32_t here = n.terminal > 0 && s.completed[static_cast<size_t>(s.at)] < n.terminal ? 1 : 0;
  return std::accumulate(s.completed.begin(), s.completed.end(), 0) + here;
}

bool ConstraintTracker::finished(const State& s) const {
  if (order_ == ConstraintOrder::ordered) return s.at + 1 == static_cast<int64_t>(sequence_.size());
  return nodes_.front().num_constraints == completed_count(s);
}

int64_t ConstraintTracker::bank(const State& s) const {
  if (order_ == ConstraintOrder::ordered) return s.at + 1;
  return std::accumulate(s.generated.begin(), s.generated.end(), int64_t{0});
}

std::vector<int64_t> ConstraintTracker::next_tokens(const State& s) const {
  std::set<int64_t> tokens;
  if (order_ == ConstraintOrder::ordered) {
    if (s.at > 0) tokens.insert(sequence_.front());
    if (!finished(s)) tokens.insert(sequence_[static_cast<size_t>(s.at + 1)]);
  } else {
    for (const auto& c : nodes_.front().children) tokens.insert(c.first);
    if (s.at != 0) {
      for (const auto& c : nodes_[static_cast<size_t>(s.at)].children) tokens.insert(c.first);
    }
  }
  return {tokens.begin(), tokens.end()};
}

ConstraintTracker::State ConstraintTracker::advance(const State& s, int64_t token) const {
  if (order_ == ConstraintOrder::ordered) {
    State next = s;
    const auto n = static_cast<int64_t>(sequence_.size());
    if (finished(s)) return next;
    if (sequence_[static_cast<size_t>(s.at + 1)] == token) {
      next.at = s.at + 1;
    } else if (ends_[static_cast<size_t>(s.at >= 0 ? s.at : n - 1)]) {
      // Between constraints (or before the first) any token may come.
    } else {
      next.at = token == sequence_.front() ? 0 : -1;  // inside a constraint: start over
    }
    return next;
  }
  // Unordered: go down the trie while the child's constraints are not all generated yet.
  auto moved_to = [&](int64_t node) {
    State next = s;
    next.at = node;
    if (node != 0) next.generated[static_cast<size_t>(node)] += 1;
    return next;
  };
  auto open = [&](int64_t node) {
    return node >= 0 && s.generated[static_cast<size_t>(node)] < nodes_[static_cast<size_t>(node)].num_constraints;
  };
  const int64_t down = child(s.at, token);
  if (open(down)) return moved_to(down);
  // Fallen off the trie: from the root if the token starts a constraint that is still open, else
  // at the root; the path left behind is given back, up to the first constraint it completes.
  const int64_t from_root = child(0, token);
  State next = moved_to(open(from_root) ? from_root : 0);
  for (int64_t node = s.at; node != 0; node = nodes_[static_cast<size_t>(node)].parent) {
    const auto& n = nodes_[static_cast<size_t>(node)];
    if (n.terminal > 0 && s.completed[static_cast<size_t>(node)] < n.terminal) {
      next.completed[static_cast<size_t>(node)] += 1;
      break;
    }
    next.generated[static_cast<size_t>(node)] -= 1;
  }
  return next;
}

std::vector<Candidate> constrained_candidates(const ConstraintTracker& tracker,
                                              const std::vector<ConstraintTracker::State>& row_states,
                                              std::vector<Candidate> cands, const float* lprobs, int64_t vocab,
                                              int64_t step, int64_t count, std::vector<ConstraintTracker::State>* states) {
  // Each row's next constraint tokens (at step 0 the rows are one).
  const auto rows = static_cast<int64_t>(step == 0 ? 1 : row_states.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t : tracker.next_tokens(row_states[static_cast<size_t>(r)])) cands.push_back({lprobs[r * vocab + t], r, t});
  }
  const size_t n = cands.size();
  std::vector<ConstraintTracker::State> moved(n);
  std::vector<int64_t> banks(n);
  std::vector<float> keys(n);
  const int64_t key_tokens = tracker.key_tokens();
  for (size_t i = 0; i < n; ++i) {
    moved[i] = tracker.advance(row_states[static_cast<size_t>(cands[i].row)], cands[i].token);
    banks[i] = tracker.bank(moved[i]);
    // fairseq's key, in float32 as it computes it: 100 per missing constraint token below the score
    // (so a candidate far behind in score can pass one a bank ahead).
    keys[i] = static_cast<float>((key_tokens - banks[i]) * -100) + cands[i].score;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] > keys[b]; });
  // Duplicates (the same token after the same row) are neighbours now: keep the first.
  std::vector<size_t> unique;
  for (size_t i : order) {
    if (!unique.empty() && cands[unique.back()].row == cands[i].row && cands[unique.back()].token == cands[i].token) continue;
    unique.push_back(i);
  }
  // Round-robin over the banks: the best of each bank (fullest first), then the second of each...
  // A bank that recurs after another starts its count again, as fairseq's stripes do.
  const auto m = static_cast<int64_t>(unique.size());
  std::vector<int64_t> stripes(unique.size());
  int64_t rank = -1, current = banks[unique.front()];
  for (size_t k = 0; k < unique.size(); ++k) {
    const int64_t b = banks[unique[k]];
    if (b != current) {
      rank = 0;
      current = b;
    } else {
      ++rank;
    }
    stripes[k] = key_tokens - b + rank * (m + 1);
  }
  std::vector<size_t> dealt(unique.size());
  std::iota(dealt.begin(), dealt.end(), 0);
  std::stable_sort(dealt.begin(), dealt.end(), [&](size_t a, size_t b) { return stripes[a] < stripes[b]; });
  std::vector<Candidate> out;
  states->clear();
  for (size_t k = 0; k < dealt.size() && static_cast<int64_t>(out.size()) < count; ++k) {
    const size_t i = unique[dealt[k]];
    out.push_back(cands[i]);
    states->push_back(std::move(moved[i]));
  }
  return out;
}

}  // namespace leanseq::decode
