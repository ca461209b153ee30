#include "leanseq/runtime/classifier.h"

#include "leanseq/checkpoint/file.h"
#include "leanseq/core/error.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"

namespace leanseq::runtime {

LoadedClassifier load_classifier(const std::string& path, bool dense) {
  auto ck = checkpoint::read_checkpoint(path);
  auto values = parse_yaml_text(ck.config_yaml, path + " (config)");
  if (!checkpoint::is_classifier_config(values)) {
    throw CheckpointError(path + ": not a text classifier checkpoint (use leanseq translate for sequence models)");
  }
  const auto config = checkpoint::resolve_classify_config(values);
  LoadedClassifier out;
  out.pair = config.model->pair;
  checkpoint::read_classifier_vocab(ck.vocab, path, out.dict, out.labels);
  out.model = models::build_classifier(*config.model, out.dict.size());
  models::load_named_tensors(*out.model, ck.model_tensors, true, path);
  if (!dense) nn::prune_as_evaluated(*out.model, config.td);
  out.model->eval();
  return out;
}

torch::Tensor predict_probabilities(models::SentenceClassifier& model, const data::EncodedText& data,
                                    int64_t max_sentences, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  auto probs = torch::zeros({static_cast<int64_t>(data.first.size()), model->config().num_classes});
  for (const auto& ids : data::batch_text_by_size(data, max_sentences, 0)) {
    auto b = data::collate_text(data, ids).to(device);
    auto p = torch::softmax(model->forward(b.tokens, b.tokens2), -1).cpu();
    probs.index_copy_(0, torch::tensor(ids, torch::kLong), p);
  }
  model->train(was_training);
  return probs;
}

eval::ClassifyReport evaluate_classifier(models::SentenceClassifier& model, const data::EncodedText& data,
                                         const std::vector<std::string>& labels, int64_t max_sentences,
                                         const torch::Device& device) {
  auto probs = predict_probabilities(model, data, max_sentences, device);
  auto pred = probs.argmax(1);
  std::vector<int64_t> predicted(pred.data_ptr<int64_t>(), pred.data_ptr<int64_t>() + pred.numel());
  auto report = eval::score_predictions(data.labels, predicted, labels);
  auto gold = torch::tensor(data.labels, torch::kLong);
  report.loss = -probs.gather(1, gold.unsqueeze(1)).clamp_min(1e-12).log().mean().item<double>();
  return report;
}

}  // namespace leanseq::runtime
