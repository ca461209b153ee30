// Line charts (learning curves) and heatmaps (attention, similarity matrices) drawn with cairo,
// written as PNG or SVG by file extension.
#pragma once
#include <string>
#include <vector>

namespace leanseq::viz {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

struct Panel {
  std::string title, x_label, y_label;
  std::vector<Series> series;
};

// Panels stacked vertically in one image. Throws Error on an unknown extension or write failure.
void plot_panels(const std::vector<Panel>& panels, const std::string& path, int width = 900, int panel_height = 320);

struct Heatmap {
  std::string title;
  std::vector<std::string> row_labels, col_labels;
  std::vector<std::vector<double>> values;  // rows x cols, shown on a white-to-blue scale
  double vmin = 0, vmax = 1;
};
void plot_heatmap(const Heatmap& h, const std::string& path);

}  // namespace leanseq::viz
