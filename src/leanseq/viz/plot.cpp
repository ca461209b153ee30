#include "leanseq/viz/plot.h"

#ifdef LEANSEQ_WITH_CAIRO
#include <cairo-svg.h>
#include <cairo.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"

namespace leanseq::viz {

std::string no_charts_reason() {
  return "built without charts (cairo was not found when leanseq was built; install libcairo2-dev and rebuild)";
}

#ifdef LEANSEQ_WITH_CAIRO
bool charts_available() { return true; }

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Opens a PNG or SVG surface of the given size, calls draw, and writes the file atomically.
void render(const std::string& path, int w, int h, const std::function<void(cairo_t*)>& draw) {
  bool svg = ends_with(path, ".svg");
  if (!svg && !ends_with(path, ".png")) throw ConfigError(path + ": the output must end in .png or .svg");
  io::atomic_write(path, [&](const std::string& tmp) {
    cairo_surface_t* surface = svg ? cairo_svg_surface_create(tmp.c_str(), w, h)
                                   : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
    cairo_t* cr = cairo_create(surface);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    draw(cr);
    cairo_destroy(cr);
    cairo_status_t st = CAIRO_STATUS_SUCCESS;
    if (!svg) st = cairo_surface_write_to_png(surface, tmp.c_str());
    cairo_surface_finish(surface);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (st != CAIRO_STATUS_SUCCESS) throw Error(path + ": cannot write image: " + cairo_status_to_string(st));
  });
}

void text(cairo_t* cr, double x, double y, const std::string& s, double size, double align_x, double align_y,
          bool vertical = false) {
  cairo_set_font_size(cr, size);
  cairo_text_extents_t ext;
  cairo_text_extents(cr, s.c_str(), &ext);
  cairo_save(cr);
  cairo_translate(cr, x, y);
  if (vertical) cairo_rotate(cr, -M_PI / 2);
  cairo_move_to(cr, -ext.width * align_x - ext.x_bearing, -ext.height * align_y - ext.y_bearing);
  cairo_show_text(cr, s.c_str());
  cairo_restore(cr);
}

// "Nice" tick step for a range.
double nice_step(double range, int target) {
  double raw = range / std::max(target, 1);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

std::string tick_label(double v, double step) {
  char buf[32];
  int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) + 1e-9));
  std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 6), v);
  return buf;
}

const double kColors[][3] = {{0.12, 0.47, 0.71}, {1.0, 0.5, 0.05}, {0.17, 0.63, 0.17},
                             {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}};

void draw_panel(cairo_t* cr, const Panel& p, double x0, double y0, double w, double h) {
  const double left = 70, right = 20, top = 34, bottom = 46;
  double px = x0 + left, py = y0 + top, pw = w - left - right, ph = h - top - bottom;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const auto& s : p.series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      xmin = std::min(xmin, s.x[i]), xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, s.y[i]), ymax = std::max(ymax, s.y[i]);
    }
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  text(cr, x0 + w / 2, y0 + 8, p.title, 15, 0.5, 0);
  if (!std::isfinite(xmin)) {
    text(cr, x0 + w / 2, y0 + h / 2, "(no data)", 13, 0.5, 0.5);
    return;
  }
  if (xmax == xmin) xmax = xmin + 1;
  if (ymax == ymin) ymax = ymin + 1;
  double ypad = (ymax - ymin) * 0.05;
  ymin -= ypad, ymax += ypad;
  double xstep = nice_step(xmax - xmin, 8), ystep = nice_step(ymax - ymin, 6);
  xmin = std::floor(xmin / xstep) * xstep, xmax = std::ceil(xmax / xstep) * xstep;
  ymin = std::floor(ymin / ystep) * ystep, ymax = std::ceil(ymax / ystep) * ystep;
  auto X = [&](double v) { return px + (v - xmin) / (xmax - xmin) * pw; };
  auto Y = [&](double v) { return py + ph - (v - ymin) / (ymax - ymin) * ph; };
  // grid and ticks
  cairo_set_line_width(cr, 1);
  for (double v = xmin; v <= xmax + xstep * 1e-6; v += xstep) {
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, X(v), py), cairo_line_to(cr, X(v), py + ph), cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    text(cr, X(v), py + ph + 6, tick_label(v, xstep), 11, 0.5, 0);
  }
  for (double v = ymin; v <= ymax + ystep * 1e-6; v += ystep) {
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, px, Y(v)), cairo_line_to(cr, px + pw, Y(v)), cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    text(cr, px - 6, Y(v), tick_label(v, ystep), 11, 1, 0.5);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, px, py, pw, ph);
  cairo_stroke(cr);
  text(cr, px + pw / 2, py + ph + 24, p.x_label, 12, 0.5, 0);
  text(cr, x0 + 14, py + ph / 2, p.y_label, 12, 0.5, 0.5, true);
  // series; the legend sits in the top right corner, as wide as its longest name
  cairo_set_font_size(cr, 11);
  double name_width = 0;
  for (const auto& s : p.series) {
    cairo_text_extents_t ext;
    cairo_text_extents(cr, s.name.c_str(), &ext);
    name_width = std::max(name_width, ext.x_advance);
  }
  const double legend_x = px + pw - std::min(name_width + 40, pw);
  for (size_t k = 0; k < p.series.size(); ++k) {
    const auto& s = p.series[k];
    const double* c = kColors[k % 6];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_set_line_width(cr, 2);
    bool started = false;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      if (!started) {
        cairo_move_to(cr, X(s.x[i]), Y(s.y[i]));
        started = true;
      } else {
        cairo_line_to(cr, X(s.x[i]), Y(s.y[i]));
      }
    }
    cairo_stroke(cr);
    if (s.x.size() <= 60) {
      for (size_t i = 0; i < s.x.size(); ++i) {
        if (!std::isfinite(s.y[i])) continue;
        cairo_arc(cr, X(s.x[i]), Y(s.y[i]), 3, 0, 2 * M_PI);
        cairo_fill(cr);
      }
    }
    // legend
    double ly = py + 12 + 18 * static_cast<double>(k);
    cairo_move_to(cr, legend_x, ly), cairo_line_to(cr, legend_x + 24, ly), cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text(cr, legend_x + 30, ly, s.name, 11, 0, 0.5);
  }
}

}  // namespace

void plot_panels(const std::vector<Panel>& panels, const std::string& path, int width, int panel_height) {
  int h = panel_height * static_cast<int>(std::max<size_t>(panels.size(), 1));
  render(path, width, h, [&](cairo_t* cr) {
    for (size_t i = 0; i < panels.size(); ++i) {
      draw_panel(cr, panels[i], 0, static_cast<double>(i) * panel_height, width, panel_height);
    }
  });
}

void plot_heatmap(const Heatmap& hm, const std::string& path) {
  const size_t rows = hm.values.size(), cols = rows ? hm.values[0].size() : 0;
  const double cell = std::clamp(600.0 / static_cast<double>(std::max<size_t>({rows, cols, 1})), 14.0, 48.0);
  double label_w = 20, label_h = 20;
  for (const auto& l : hm.row_labels) label_w = std::max(label_w, 7.5 * static_cast<double>(l.size()) + 10);
  for (const auto& l : hm.col_labels) label_h = std::max(label_h, 7.5 * static_cast<double>(l.size()) + 10);
  const double top = 40 + label_h, left = label_w + 10;
  int w = static_cast<int>(left + cell * static_cast<double>(cols) + 90);
  int h = static_cast<int>(top + cell * static_cast<double>(rows) + 20);
  render(path, w, h, [&](cairo_t* cr) {
    cairo_set_source_rgb(cr, 0, 0, 0);
    text(cr, w / 2.0, 8, hm.title, 15, 0.5, 0);
    auto color = [&](double v, double rgb[3]) {
      double t = hm.vmax > hm.vmin ? std::clamp((v - hm.vmin) / (hm.vmax - hm.vmin), 0.0, 1.0) : 0.0;
      rgb[0] = 1 - 0.92 * t, rgb[1] = 1 - 0.72 * t, rgb[2] = 1 - 0.35 * t;
    };
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) {
        double rgb[3];
        color(hm.values[r][c], rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_rectangle(cr, left + cell * static_cast<double>(c), top + cell * static_cast<double>(r), cell, cell);
        cairo_fill(cr);
      }
    }
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (size_t r = 0; r < hm.row_labels.size() && r < rows; ++r) {
      text(cr, left - 6, top + cell * (static_cast<double>(r) + 0.5), hm.row_labels[r], 12, 1, 0.5);
    }
    for (size_t c = 0; c < hm.col_labels.size() && c < cols; ++c) {
      text(cr, left + cell * (static_cast<double>(c) + 0.5), top - 6, hm.col_labels[c], 12, 0, 0.5, true);
    }
    // colour bar
    double bx = left + cell * static_cast<double>(cols) + 20, by = top, bh = cell * static_cast<double>(rows);
    for (int i = 0; i < 100; ++i) {
      double rgb[3];
      color(hm.vmax - (hm.vmax - hm.vmin) * i / 99.0, rgb);
      cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle(cr, bx, by + bh * i / 100.0, 14, bh / 100.0 + 1);
      cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    text(cr, bx + 18, by, tick_label(hm.vmax, 0.01), 10, 0, 0);
    text(cr, bx + 18, by + bh, tick_label(hm.vmin, 0.01), 10, 0, 1);
  });
}

#else
bool charts_available() { return false; }
void plot_panels(const std::vector<Panel>&, const std::string& path, int, int) {
  throw Error(path + ": not written: " + no_charts_reason());
}
void plot_heatmap(const Heatmap&, const std::string& path) { throw Error(path + ": not written: " + no_charts_reason()); }
#endif

}  // namespace leanseq::viz
