import Foundation
import ProtocolHandler
import Testing
import TetherSchema

@Suite struct HealthTests {
    @Test func degradedThenUnhealthyThenHealthyAgain() {
        var health = HealthMonitor()
        #expect(health.state == .healthy)
        let outcomes = [true, false, false, false, true, true, true, true, true]
        let changes = outcomes.map { health.record(success: $0) }
        // Successes push the failures out of the window of five.
        #expect(changes == [nil, .degraded, nil, .unhealthy, nil, nil, .degraded, nil, .healthy])
        #expect(health.report.recentFailures == 0)
        #expect(health.report.recentSuccesses == 5)
    }

    @Test func aSuggestionIsNotRepeatedWithin30Seconds() {
        var book = SuggestionBook()
        let start = Date(timeIntervalSince1970: 1_000_000)
        let offers = [
            book.offer(Suggestions.checkNetwork, now: start),
            book.offer(Suggestions.checkNetwork, now: start.addingTimeInterval(29)),
            book.offer(Suggestions.tokenRejected, now: start.addingTimeInterval(29)),
            book.offer(Suggestions.checkNetwork, now: start.addingTimeInterval(30)),
        ]
        // The same words within 30 s are held back; other words are not.
        #expect(offers == [true, false, true, true])
    }

    @Test func suggestionsForConnectionStates() {
        func status(_ phase: ConnectionPhase, _ failure: ConnectionFailure? = nil, attempt: Int = 0) -> ConnectionStatus {
            ConnectionStatus(phase: phase, url: "ws://x", epoch: 1, attempt: attempt, failure: failure)
        }
        #expect(Suggestions.forConnection(status(.connected)) == nil)
        #expect(Suggestions.forConnection(status(.waitingForNetwork))?.severity == .major)
        #expect(Suggestions.forConnection(status(.failed, .credentialRejected))?.severity == .critical)
        #expect(Suggestions.forConnection(status(.failed, .tls)) == Suggestions.certificateUntrusted)
        #expect(Suggestions.forConnection(status(.failed, .unreachable)) == Suggestions.checkGatewayAddress)
        #expect(Suggestions.forConnection(status(.reconnecting, attempt: 1)) == nil)
        #expect(Suggestions.forConnection(status(.reconnecting, attempt: 3)) == Suggestions.gatewayNotAnswering)
    }
}
