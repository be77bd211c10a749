import Foundation

/// `cairn-bench --charts RESULTS_JSON SCALING_JSON DIR`: draws, as SVG written by hand
/// (no package), the ratios of a run against SQLite (`ratios.svg`) and the scaling steps'
/// time and peak memory against the number of records (`scaling-time.svg`,
/// `scaling-memory.svg`). RESULTS.md and the README show them.
func runCharts(results: String, scaling: String, directory: String) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let run = try JSONDecoder().decode(RunFile.self, from: Data(contentsOf: URL(fileURLWithPath: results)))
    guard !run.workloads.isEmpty else { throw BenchError("\(results) holds no workload") }
    try ratioChart(run).write(toFile: directory + "/ratios.svg", atomically: true, encoding: .utf8)
    let steps = try JSONDecoder().decode([ScalingRecord].self, from: Data(contentsOf: URL(fileURLWithPath: scaling)))
    guard !steps.isEmpty else { throw BenchError("\(scaling) holds no step") }
    let names = ScalingStep.allCases.filter { $0 != .importKilled }.map(\.rawValue)
    func series(_ value: (ScalingRecord) -> Double) -> [Series] {
        names.map { name in
            Series(name: name, points: steps.filter { $0.step == name && value($0) > 0 }.map { (Double($0.records), value($0)) })
        }.filter { !$0.points.isEmpty }
    }
    try lineChart(title: "Scaling: time of each step", yUnit: "s", series: series(\.seconds))
        .write(toFile: directory + "/scaling-time.svg", atomically: true, encoding: .utf8)
    try lineChart(title: "Scaling: peak resident set of each step", yUnit: "MB", series: series { $0.peakRSSBytes / 1_048_576 })
        .write(toFile: directory + "/scaling-memory.svg", atomically: true, encoding: .utf8)
    print("wrote \(directory)/ratios.svg, scaling-time.svg, scaling-memory.svg")
}

/// The parts of `--json`'s file a chart reads.
struct RunFile: Decodable {
    struct Workload: Decodable { var name: String; var ratio: Double }
    var workloads: [Workload]
}

/// One scaling step at one size, as `--scaling MAX --json FILE` writes them.
struct ScalingRecord: Codable {
    var records: Int
    var step: String
    var seconds: Double
    var peakRSSBytes: Double
}

struct Series {
    var name: String
    var points: [(x: Double, y: Double)]
}

private let palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]

/// Text for an SVG element's content or attribute.
private func escaped(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
}

private func number(_ value: Double) -> String { String(format: "%.1f", value) }

/// A number for an axis label: 0.125, 2, 10k, 1M.
private func label(_ value: Double) -> String {
    if value >= 1_000_000 { return String(format: "%gM", value / 1_000_000) }
    if value >= 1_000 { return String(format: "%gk", value / 1_000) }
    return String(format: "%g", value)
}

/// One horizontal bar per workload from 1× to its ratio, on a log₂ axis: green where
/// Cairn is faster, red where SQLite is.
func ratioChart(_ run: RunFile) -> String {
    let rowHeight = 18.0, left = 190.0, right = 70.0, top = 40.0, plotWidth = 520.0
    let height = top + rowHeight * Double(run.workloads.count) + 40
    let ratios = run.workloads.map { max($0.ratio, 1.0 / 1024) }
    let low = floor(log2(min(ratios.min() ?? 1, 1) / 1.05)), high = ceil(log2(max(ratios.max() ?? 1, 1) * 1.05))
    let span = max(high - low, 1)
    func x(_ ratio: Double) -> Double { left + (log2(ratio) - low) / span * plotWidth }
    var svg = svgHeader(width: left + plotWidth + right, height: height)
    svg += ##"<text x="10" y="20" font-size="14" font-weight="bold">Cairn against SQLite: SQLite's time ÷ Cairn's (above 1: Cairn is faster)</text>"## + "\n"
    for power in stride(from: low, through: high, by: 1) {
        let gx = x(pow(2, power))
        svg += ##"<line x1="\##(number(gx))" y1="\##(number(top - 6))" x2="\##(number(gx))" y2="\##(number(height - 34))" stroke="\##(power == 0 ? "#333" : "#ddd")"/>"## + "\n"
        svg += ##"<text x="\##(number(gx))" y="\##(number(height - 20))" font-size="11" text-anchor="middle">\##(label(pow(2, power)))×</text>"## + "\n"
    }
    for (index, workload) in run.workloads.enumerated() {
        let y = top + rowHeight * Double(index)
        let ratio = ratios[index]
        let (from, to) = (min(x(1), x(ratio)), max(x(1), x(ratio)))
        let color = ratio >= 1 ? "#2ca02c" : "#d62728"
        svg += ##"<text x="\##(number(left - 8))" y="\##(number(y + 12))" font-size="12" text-anchor="end">\##(escaped(workload.name))</text>"## + "\n"
        svg += ##"<rect x="\##(number(from))" y="\##(number(y + 3))" width="\##(number(max(to - from, 1)))" height="\##(number(rowHeight - 6))" fill="\##(color)"/>"## + "\n"
        svg += ##"<text x="\##(number(to + 4))" y="\##(number(y + 12))" font-size="11">\##(String(format: "%.2f", workload.ratio))</text>"## + "\n"
    }
    return svg + "</svg>\n"
}

/// Lines of `series` against the number of records, both axes logarithmic (base 10).
func lineChart(title: String, yUnit: String, series: [Series]) -> String {
    let left = 70.0, right = 140.0, top = 40.0, bottom = 50.0, plotWidth = 480.0, plotHeight = 300.0
    let xs = series.flatMap { $0.points.map(\.x) }, ys = series.flatMap { $0.points.map(\.y) }
    let xLow = floor(log10(xs.min() ?? 1)), xHigh = max(ceil(log10(xs.max() ?? 10)), xLow + 1)
    let yLow = floor(log10(ys.min() ?? 1)), yHigh = max(ceil(log10(ys.max() ?? 10)), yLow + 1)
    func px(_ value: Double) -> Double { left + (log10(value) - xLow) / (xHigh - xLow) * plotWidth }
    func py(_ value: Double) -> Double { top + plotHeight - (log10(value) - yLow) / (yHigh - yLow) * plotHeight }
    var svg = svgHeader(width: left + plotWidth + right, height: top + plotHeight + bottom)
    svg += ##"<text x="\##(number(left))" y="20" font-size="14" font-weight="bold">\##(escaped(title))</text>"## + "\n"
    for power in stride(from: xLow, through: xHigh, by: 1) {
        let gx = px(pow(10, power))
        svg += ##"<line x1="\##(number(gx))" y1="\##(number(top))" x2="\##(number(gx))" y2="\##(number(top + plotHeight))" stroke="#ddd"/>"## + "\n"
        svg += ##"<text x="\##(number(gx))" y="\##(number(top + plotHeight + 16))" font-size="11" text-anchor="middle">\##(label(pow(10, power)))</text>"## + "\n"
    }
    svg += ##"<text x="\##(number(left + plotWidth / 2))" y="\##(number(top + plotHeight + 36))" font-size="12" text-anchor="middle">records</text>"## + "\n"
    for power in stride(from: yLow, through: yHigh, by: 1) {
        let gy = py(pow(10, power))
        svg += ##"<line x1="\##(number(left))" y1="\##(number(gy))" x2="\##(number(left + plotWidth))" y2="\##(number(gy))" stroke="#ddd"/>"## + "\n"
        svg += ##"<text x="\##(number(left - 6))" y="\##(number(gy + 4))" font-size="11" text-anchor="end">\##(label(pow(10, power))) \##(escaped(yUnit))</text>"## + "\n"
    }
    for (index, line) in series.enumerated() {
        let color = palette[index % palette.count]
        let points = line.points.sorted { $0.x < $1.x }.map { "\(number(px($0.x))),\(number(py($0.y)))" }
        svg += ##"<polyline fill="none" stroke="\##(color)" stroke-width="2" points="\##(points.joined(separator: " "))"/>"## + "\n"
        for point in line.points {
            svg += ##"<circle cx="\##(number(px(point.x)))" cy="\##(number(py(point.y)))" r="3" fill="\##(color)"/>"## + "\n"
        }
        let ly = top + 14 + 18 * Double(index)
        svg += ##"<line x1="\##(number(left + plotWidth + 12))" y1="\##(number(ly - 4))" x2="\##(number(left + plotWidth + 32))" y2="\##(number(ly - 4))" stroke="\##(color)" stroke-width="2"/>"## + "\n"
        svg += ##"<text x="\##(number(left + plotWidth + 36))" y="\##(number(ly))" font-size="12">\##(escaped(line.name))</text>"## + "\n"
    }
    return svg + "</svg>\n"
}

private func svgHeader(width: Double, height: Double) -> String {
    ##"<svg xmlns="http://www.w3.org/2000/svg" width="\##(number(width))" height="\##(number(height))" viewBox="0 0 \##(number(width)) \##(number(height))" font-family="Helvetica, Arial, sans-serif">"## + "\n"
        + ##"<rect width="100%" height="100%" fill="white"/>"## + "\n"
}
