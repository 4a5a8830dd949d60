import ArgumentParser
import FoundationEssentials
import FrontEnd
import TetherBus
import TetherSchema
import TetherService

struct Approvals: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the approvals the gateway waits for (OpenClaw): commands the agent asks to run, what plugins ask.",
        discussion: "Answer one with tether approve ID DECISION. protod keeps them while no front end runs, and asks the gateway again after every reconnect."
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Flag(help: "One JSON object.")
    var json = false

    func run() async throws {
        let reply = try await ask(ApprovalsCommand.self, .init(), options, remote, timeout: .seconds(3), attempts: 2)
        if json {
            try printJSON(reply)
            return
        }
        if let why = reply.unavailable { print(TerminalSafe.visible("no approvals: \(why)", newlines: false)) }
        for approval in reply.pending {
            print(TerminalSafe.visible(ApprovalWords.line(approval, now: Date()), newlines: false))
        }
        if reply.pending.isEmpty && reply.unavailable == nil { print("no approval is waiting") }
    }
}

struct Approve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Answer an approval the gateway waits for (OpenClaw).",
        discussion: "ID as tether approvals shows it (a unique prefix of the id will do); DECISION is allow-once, allow-always or deny."
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Argument(help: "The approval's id, or a unique prefix of it.")
    var id: String

    @Argument(help: "allow-once, allow-always or deny.")
    var decision: String

    func validate() throws {
        guard ApprovalDecision(rawValue: decision) != nil else { throw ValidationError("DECISION must be allow-once, allow-always or deny") }
    }

    func run() async throws {
        let reply = try await ask(
            ApproveCommand.self, .init(id: id, decision: ApprovalDecision(rawValue: decision) ?? .deny), options, remote, timeout: .seconds(12), attempts: 1)
        print(TerminalSafe.visible("\(reply.ended.approval.shortID) \(reply.ended.approval.summary): \(reply.ended.words)", newlines: false))
    }
}
