public import Foundation
public import TetherBus
import TetherSchema

/// What the tap does with each message it receives: notices gaps, filters, formats,
/// records, and counts rates. A value, so it is tested without a bus.
public struct TapSession: Sendable {
    public struct Output: Sendable, Equatable {
        /// Lines for standard output.
        public var lines: [String] = []
        /// A line for the recording, if the message is recorded.
        public var recorded: String?
        /// Whether the message passed the filter (counts toward `--count`).
        public var shown = false
    }

    public let filter: TapFilter
    public let formatter: TapFormatter
    /// With `--rate`, messages are counted, not printed.
    public let showsRates: Bool
    public private(set) var sequences = SequenceTracker()
    public private(set) var meter = RateMeter()
    private let recorder = TapFormatter(style: .json)

    public init(filter: TapFilter, formatter: TapFormatter, showsRates: Bool) {
        self.filter = filter
        self.formatter = formatter
        self.showsRates = showsRates
    }

    /// Handles a message received `offset` seconds after the tap started.
    public mutating func receive(_ message: BusMessage, at offset: TimeInterval) -> Output {
        var output = Output()
        // Gaps are judged on everything the tap receives (it subscribes to every topic); they
        // are told for the sources the filter shows.
        let finding = sequences.observe(message.header)
        let sourceShown = TapFilter(topics: [], sources: filter.sources, showProbes: true).accepts(message)
        if let finding, sourceShown, !showsRates { output.lines.append(formatter.note(finding.description)) }
        guard filter.accepts(message) else { return output }
        output.shown = true
        if showsRates {
            meter.record(topic: message.topic.name, bytes: message.body.count, at: offset)
        } else {
            output.lines.append(formatter.format(message, at: offset))
        }
        output.recorded = recorder.format(message, at: offset)
        return output
    }

    /// The `--rate` table as of `offset`.
    public mutating func rateTable(at offset: TimeInterval) -> String {
        formatter.rates(meter.rows(at: offset, elapsed: offset), window: meter.window)
    }
}
