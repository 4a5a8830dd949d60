import Logging
import Testing
import TetherHTTPServer

@testable import WebFrontEnd

/// tether-web's warm-up goes through the whole of a connection's setup, the upgrade included,
/// before the server listens (ChildChannelWarmUp says why).
@Suite struct ChildChannelWarmUpTests {
    @Test func theWarmUpUpgradesOneConnectionAndSetsUpAnother() {
        let answers = ChildChannelWarmUp.run(logger: Logger(label: "warm-up")) { GuardedChildChannel(inner: $0) }
        #expect(answers == ["HTTP/1.1 101 Switching Protocols", ""])
    }
}
