import Foundation
import OpenClawWire
import TetherSchema
import TetherWire

extension DeliveryStateMachine {
    // MARK: A message for the reply in progress: steer or interrupt (today's OpenClaw)

    /// Whether a message that asked to steer or interrupt goes into the run in progress now:
    /// the gateway takes queue modes, a run is under way in the session, and no other message
    /// written on this connection waits for its answer (what a reconnect leaves unknown stays
    /// one message).
    func goesIntoRun(_ message: Pending, on open: Connection, link: OpenClawLink) -> WhileBusy? {
        guard let choice = message.whileBusy, link.takesQueueModes, !isQuiet(link) else { return nil }
        let unanswered = pending.contains { other in
            if case .written = other.delivery { return other.id != message.id }
            return false
        }
        return unanswered ? nil : choice
    }

    /// The run in progress in the session chatted in, if it is Tether's: the message it answers.
    func runInProgress(_ link: OpenClawLink) -> MessageID? {
        runs.values.filter { $0.session == link.sessionKey }.sorted { $0.startedAt < $1.startedAt }.first?.inReplyTo
    }

    /// The words for a message that waits behind the reply in progress although it asked to
    /// steer or interrupt it: this gateway offers neither.
    static func cannotGoIntoRun(_ choice: WhileBusy) -> String {
        WhileBusy.unavailableWordsPrefix
            + "\(choice == .steer ? "steer" : "interrupt") a reply in progress (it takes no queue modes): it waits, and is sent when that reply ends, for a reply of its own"
    }

    /// `chat.send` of a message written into the run in progress answered `started`.
    /// Interrupt: the gateway stopped that run (`interruptedActiveRun`) and this message runs
    /// instead. Steer: the gateway holds it for the run; an empty `final` under its key
    /// follows, and the session's row says whether the run took it.
    mutating func wroteIntoRunAnswered(_ index: Int, _ result: ChatSendResult?, now: Date, into actions: inout [Action]) {
        guard let choice = pending[index].wroteWhileBusy, case .openClaw(let link)? = connection?.dialect else { return }
        let id = pending[index].messageID
        switch choice {
        case .interrupt:
            let detail =
                result?.interruptedActiveRun == true
                ? "interrupting the reply in progress: the gateway stopped it, and answers this message instead"
                : "interrupting: the gateway did not say it stopped a reply in progress (one may have ended first); this message is answered on its own"
            actions.append(.publishDelivery(DeliveryUpdate(id: id, status: .accepted, detail: detail)))
        case .steer:
            pending[index].steeringInto = runInProgress(link)
            actions.append(
                .publishDelivery(
                    DeliveryUpdate(id: id, status: .accepted, detail: "given to the reply in progress to steer it: waiting for the gateway to say it took it")))
        }
    }

    /// The empty `final` under a steered message's key: the gateway admitted it. Whether the
    /// run in progress took it or it waits in the gateway's queue, the session's row says
    /// (`lastBusyMessageOutcome`): asked now.
    mutating func steerAdmitted(_ index: Int, now: Date, into actions: inout [Action]) {
        runs[pending[index].id] = nil
        pending[index].awaitsSteerVerdict = true
        askForSettings(into: &actions)
        settleBotState(now: now, into: &actions)
    }

    /// The session's row answered: a steered message waiting for the verdict is delivered
    /// into the reply in progress, or waits in the gateway's queue for a reply of its own.
    mutating func steerVerdict(_ outcome: BusyMessageOutcome?, now: Date, into actions: inout [Action]) {
        for key in pending.filter(\.awaitsSteerVerdict).map(\.id) {
            guard let index = pending.firstIndex(where: { $0.id == key }) else { continue }
            pending[index].awaitsSteerVerdict = false
            let id = pending[index].messageID
            if outcome?.steered == true {
                awaitingReply.removeAll { $0 == id }
                acknowledged(
                    MessageAck(messageID: id, status: .received, serverTimestamp: now), now: now, into: &actions,
                    detail: "steered into the reply in progress: that reply answers both, and this message has no reply of its own",
                    answeredWith: pending[index].steeringInto)
            } else {
                let why = outcome.map { "the gateway did not steer it (\($0.reason ?? $0.kind))" } ?? "the gateway did not say it steered it"
                pending[index].wroteWhileBusy = nil
                heldByGateway(index, now: now, into: &actions, because: why)
            }
        }
    }
}
