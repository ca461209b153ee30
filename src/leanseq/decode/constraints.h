// Lexically constrained decoding with fairseq's semantics (its LexicallyConstrainedBeamSearch, after
// Post & Vilar 2018 and Hu et al. 2019): every translation contains each constraint, a sequence of
// target tokens. Each hypothesis carries a state that says how far it is through its sentence's
// constraints; </s> is impossible until they are all met, and each step's beam is shared out across
// the "banks" of hypotheses that have met the same number of constraint tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace leanseq::decode {

// How the constraints of a sentence are met: in the order given (tokens may come between two
// constraints, not inside one), or in any order (fairseq's --constraints ordered / unordered).
enum class ConstraintOrder { none, ordered, unordered };

// "ordered" or "unordered" (fairseq's names); ConfigError "ordered or unordered, got '...'" otherwise.
ConstraintOrder parse_constraint_order(const std::string& name);

// One sentence's constraints, each a non-empty sequence of target token ids.
using Constraints = std::vector<std::vector<int64_t>>;

// The constraints of one sentence and the moves of a hypothesis through them. Ordered constraints
// are one concatenated sequence (a state is a position in it); unordered ones a trie of the
// sequences (a state is a node, with the counts of nodes generated and constraints completed).
class ConstraintTracker {
 public:
  struct State {
    int64_t at = -1;                    // ordered: the last position met (-1: none); unordered: the node (0: root)
    std::vector<int32_t> generated;     // unordered, per node
    std::vector<int32_t> completed;     // unordered, per node
  };

  ConstraintTracker(const Constraints& constraints, ConstraintOrder order);
  State start() const;
  // The state after `token`: the next token of a constraint goes on with it; another one falls back
  // (a completed constraint stays completed).
  State advance(const State& s, int64_t token) const;
  bool finished(const State& s) const;        // every constraint met: </s> is allowed
  int64_t bank(const State& s) const;         // constraint tokens met so far
  std::vector<int64_t> next_tokens(const State& s) const;  // the tokens that make progress, ascending
  // The constraint tokens fairseq's sort key counts: every occurrence for ordered constraints (its
  // set holds each token as a tensor of its own), the distinct tokens for unordered ones.
  int64_t key_tokens() const { return key_tokens_; }

 private:
  ConstraintOrder order_;
  int64_t key_tokens_ = 0;
  // ordered
  std::vector<int64_t> sequence_;
  std::vector<bool> ends_;  // whether a constraint ends at each position
  // unordered: the trie, node 0 its root
  struct Node {
    int64_t token = -1, parent = -1;
    int32_t terminal = 0;         // constraints that end here
    int32_t num_constraints = 0;  // constraints through here
    std::vector<std::pair<int64_t, int64_t>> children;  // (token, node)
  };
  std::vector<Node> nodes_;
  int64_t child(int64_t node, int64_t token) const;
  int32_t completed_count(const State& s) const;
};

// One step's candidates of one sentence, as fairseq's step_sentence chooses them: `cands` (the best
// of the whole beam, then each row's best) are joined by each row's next constraint tokens, moved
// through the constraints, sorted by (bank, score), freed of duplicates and dealt out round-robin
// over the banks, fullest first; the first `count` are kept. `lprobs` ([rows, vocab], row-major):
// each row's scores so far plus its log-probabilities (at step 0 only its first row counts).
struct Candidate {
  float score;
  int64_t row, token;
};
std::vector<Candidate> constrained_candidates(const ConstraintTracker& tracker,
                                              const std::vector<ConstraintTracker::State>& row_states,
                                              std::vector<Candidate> cands, const float* lprobs, int64_t vocab,
                                              int64_t step, int64_t count, std::vector<ConstraintTracker::State>* states);

// The most constraint tokens one sentence may carry (their memory per hypothesis grows with them).
constexpr int64_t kMaxConstraintTokens = 1024;

}  // namespace leanseq::decode
