import Testing
import TetherBus
import TetherSchema
import TetherService
import TetherTesting

/// What tells connd that a front end is attached, at no cost while idle: a presence at the
/// start, one whenever a subscriber to presences arrives, one each renewal, one leaving.
@Suite struct PresenceAnnouncerTests {
    @Test func aSubscriberArrivingHearsEveryFrontEndAtOnceNotAtTheNextRenewal() async throws {
        let bus = InMemoryBus()
        // A renewal no test waits for: what arrives comes from the start and the subscriber.
        let announcer = PresenceAnnouncer(bus: bus.client("front-end"), frontEnd: "tether", renewal: .seconds(3600))
        let running = Task { await announcer.run() }
        defer { running.cancel() }
        // connd starts (or starts again) after the front end: it hears of it at once.
        var presences = try await bus.client("connd").subscribe(to: [Topic.frontEndPresence.name]).makeAsyncIterator()
        let heard = try #require(await presences.next()).decode(FrontEndPresence.self)
        #expect(heard.frontEnd == "tether" && heard.state == .active)
        #expect(heard.renewalSeconds == 3600, "it says how long until the next, so connd waits three of them")
        announcer.leave()
        // The start's own presence may come first, if its task ran after the subscription.
        var said: [FrontEndPresence.State] = []
        while said.last != .leaving, said.count < 3, let next = await presences.next() {
            let presence = try next.decode(FrontEndPresence.self)
            #expect(presence.instance == heard.instance)
            said.append(presence.state)
        }
        #expect(said.last == .leaving, "\(said)")
    }

    @Test func aChangeOfAttentionIsSaidAtOnceAndOnlyOnce() async throws {
        let bus = InMemoryBus()
        var presences = try await bus.client("connd").subscribe(to: [Topic.frontEndPresence.name]).makeAsyncIterator()
        let announcer = PresenceAnnouncer(bus: bus.client("front-end"), frontEnd: "tether send", renewal: .seconds(3600), attention: .unattended)
        announcer.setAttention(.unattended)
        announcer.setAttention(.away)
        announcer.setAttention(.away)
        announcer.setAttention(.focused)
        announcer.leave()
        var said: [FrontEndPresence.Attention?] = []
        while said.count < 3, let next = await presences.next() {
            said.append(try next.decode(FrontEndPresence.self).attention)
        }
        #expect(said == [.away, .focused, .focused], "a change is published without waiting for the renewal; the same attention again is not")
    }
}
