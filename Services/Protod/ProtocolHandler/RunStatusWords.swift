import Foundation
import OpenClawWire

/// What today's gateways say of a run in words: a `status` event's phase or retry, and an
/// `error` event's kind and detail.
enum RunStatusWords {
    /// A `status` event in words ("retrying: rate limit, 2 of 5"; "preparing workspace"); nil
    /// when it says nothing Tether can put in words.
    static func status(_ event: ChatEventPayload) -> String? {
        if let retry = event.retry {
            var words = "retrying"
            if let reason = retry.reason { words += ": " + reason.replacing("_", with: " ") }
            if let attempt = retry.attempt {
                words += (retry.reason == nil ? ": attempt " : ", ") + "\(attempt)" + (retry.maxAttempts.map { " of \($0)" } ?? "")
            }
            return words
        }
        guard let phase = event.phase?.trimmingWhitespaceAndSeparators(), !phase.isEmpty else { return nil }
        return phase
    }

    /// Why an `error` event ended the run, in words, with the gateway's detail.
    static func error(_ event: ChatEventPayload) -> String {
        var detail = [event.errorMessage, event.errorDetail].compactMap { $0?.isEmpty == false ? $0 : nil }
        if detail.count == 2, detail[0] == detail[1] { detail.removeLast() }
        let said = detail.isEmpty ? "" : ": " + detail.joined(separator: "; ")
        switch event.errorKind {
        case "refusal"?: return "the model refused to answer" + said
        case "timeout"?: return "the model took too long and the gateway gave up (timeout)" + said
        case "rate_limit"?: return "the model's rate limit was reached and the gateway gave up" + said
        case "context_length"?: return "the conversation is longer than the model's context" + said
        case let kind?: return "the gateway reported an error (\(kind))" + said
        case nil: return "the gateway reported an error" + (said.isEmpty ? ": no reason given" : said)
        }
    }
}

extension String {
    /// The words of an identifier as a gateway writes it (`preparing_workspace`, `starting-model`).
    fileprivate func trimmingWhitespaceAndSeparators() -> String {
        replacing("_", with: " ").replacing("-", with: " ").trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
