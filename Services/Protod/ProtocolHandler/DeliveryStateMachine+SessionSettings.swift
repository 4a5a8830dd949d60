import Foundation
public import OpenClawWire
public import TetherSchema

// MARK: Session settings and usage

extension DeliveryStateMachine {
    /// The words `session.settings` has on a seed gateway, and a front end's settings commands answer there.
    public static let settingsUnavailableOnSeed = "not available with this gateway: it speaks the seeds' JSON, which has no models, thinking levels or usage"

    /// Retains `settings` on `session.settings` when they changed.
    mutating func learnSettings(_ settings: SessionSettings, into actions: inout [Action]) {
        guard settings != sessionSettings else { return }
        sessionSettings = settings
        actions.append(.retainSettings(settings))
    }

    /// Asks the gateway for the session's row (`sessions.list`): also after each run in the
    /// session ends (a reply, or a setting the gateway answered).
    mutating func askForSettings(into actions: inout [Action]) {
        // Written only where connd hears it: a frame written before is lost in the bus.
        guard var open = decidable, case .openClaw(var link) = open.dialect else { return }
        let frame = link.settingsRequest()
        settingsAskedFor = link.sessionKey
        open.dialect = .openClaw(link)
        connection = open
        write(frame, on: open.epoch, into: &actions)
    }

    /// Asks when the session chatted in is not the one last asked for on this connection: on
    /// connecting, after the history lookup, and after going over to another session.
    mutating func askForSettingsOfNewSession(into actions: inout [Action]) {
        guard case .openClaw(let link)? = decidable?.dialect, settingsAskedFor != link.sessionKey else { return }
        askForSettings(into: &actions)
    }

    /// The gateway's `sessions.list`: the row of the session chatted in, or the gateway's
    /// defaults for a session it does not list yet. A refusal changes nothing.
    mutating func settingsAnswered(_ result: SessionsListResult?, now: Date, into actions: inout [Action]) {
        guard let result, case .openClaw(let link)? = connection?.dialect else { return }
        learnSettings(Self.learnedSettings(of: link.sessionKey, in: result, mainSessionKey: link.mainSessionKey), into: &actions)
        let row = result.sessions.first { OpenClawProtocol.canonicalSessionKey($0.key, mainSessionKey: link.mainSessionKey) == link.sessionKey }
        steerVerdict(row?.lastBusyMessageOutcome, now: now, into: &actions)
    }

    /// The settings of `key` (canonical) as a `sessions.list` answer has them.
    public static func learnedSettings(of key: String, in result: SessionsListResult, mainSessionKey: String?) -> SessionSettings {
        let defaults = result.defaults
        guard let row = result.sessions.first(where: { OpenClawProtocol.canonicalSessionKey($0.key, mainSessionKey: mainSessionKey) == key }) else {
            return SessionSettings(
                sessionKey: key, modelProvider: defaults?.modelProvider, model: defaults?.model, contextTokens: defaults?.contextTokens)
        }
        return SessionSettings(
            sessionKey: key, sessionID: row.sessionId, modelProvider: row.modelProvider ?? defaults?.modelProvider, model: row.model ?? defaults?.model,
            thinkingLevel: row.thinkingLevel, inputTokens: row.inputTokens, outputTokens: row.outputTokens, totalTokens: row.totalTokens,
            contextTokens: row.contextTokens ?? defaults?.contextTokens, estimatedCostUsd: row.estimatedCostUsd)
    }
}

// MARK: Changing them

/// What `session.set` sends: the gateway's text commands for a change, checked first.
public enum SettingsChange {
    /// The messages for a change, `/model` before `/think`, or why it is refused in words.
    /// - Parameter models: the gateway's models, to check `model` against; nil when the gateway
    ///   could not list them (the gateway then judges the name itself).
    public static func messages(model: String?, thinking: String?, models: [ModelChoice]?) -> Result<[(setting: String, text: String)], Refusal> {
        var messages: [(String, String)] = []
        if let model {
            if let models {
                guard let chosen = models.first(where: { $0.isNamed(model) }) else {
                    let known = models.prefix(8).map(\.reference).joined(separator: ", ")
                    return .failure(Refusal("the gateway has no model \(model)" + (known.isEmpty ? "" : ": it has \(known)") + " (/models lists them)"))
                }
                messages.append(("model", "/model \(chosen.reference)"))
            } else {
                messages.append(("model", "/model \(model)"))
            }
        }
        if let thinking {
            guard let level = ThinkingLevel(reading: thinking) else {
                return .failure(Refusal("\(thinking) is no thinking level: use \(ThinkingLevel.listed) (or on, min, med, max, auto)"))
            }
            messages.append(("thinking", "/think \(level.rawValue)"))
        }
        return .success(messages)
    }

    /// A change refused before anything was sent.
    public struct Refusal: Error, Equatable, CustomStringConvertible {
        public var description: String

        init(_ description: String) {
            self.description = description
        }
    }
}
