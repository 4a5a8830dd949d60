import FrontEnd
import Testing

/// What `tether`, `tether send` and `tether watch` do when no set runs.
@Suite struct SetStartTests {
    @Test func aSetUpUserGetsTheSetStartedThroughTheUnitWhereItIsInstalled() {
        #expect(SetStart.decide(setUp: true, unitInstalled: true, runDirectory: nil, autostart: true, remote: false) == .unit)
        #expect(
            SetStart.decide(setUp: true, unitInstalled: false, runDirectory: nil, autostart: true, remote: false) == .compose(arguments: ["up", "--detach"]))
        // The unit runs the set in the default run directory only.
        #expect(
            SetStart.decide(setUp: true, unitInstalled: true, runDirectory: "/tmp/r", autostart: true, remote: false)
                == .compose(arguments: ["up", "--detach", "--run-dir", "/tmp/r"]))
    }

    @Test func nothingIsStartedWhenNothingIsSetUpWhenToldNotToOrOnAnotherHost() {
        #expect(SetStart.decide(setUp: false, unitInstalled: true, runDirectory: nil, autostart: true, remote: false) == .explain(SetStart.notSetUp))
        #expect(
            SetStart.decide(setUp: true, unitInstalled: true, runDirectory: nil, autostart: false, remote: false)
                == .explain("start it with systemctl --user start tether (tether setup --enable starts it at every login)"))
        #expect(
            SetStart.decide(setUp: true, unitInstalled: false, runDirectory: "/tmp/r", autostart: false, remote: false)
                == .explain("start it with tether-compose up --detach --run-dir /tmp/r"))
        #expect(
            SetStart.decide(setUp: true, unitInstalled: false, runDirectory: nil, autostart: true, remote: true)
                == .explain("the bus on the other host does not answer: start the set there"))
    }
}
