// Line charts (learning curves) and heatmaps (attention, similarity matrices) drawn with cairo,
// written as PNG or SVG by file extension. A build without cairo (-DLEANSEQ_CHARTS=OFF, or AUTO
// where it is not found) has no charts: charts_available() is false and plot_* throw Error.
#pragma once
#include <string>
#include <vector>

namespace leanseq::viz {

// Whether this build draws charts; where a chart is a side output, callers skip it when not.
bool charts_available();
// "built without charts (...)": the reason the plot_* functions give.
std::string no_charts_reason();

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
