import Foundation
import Testing
import TetherSchema

@testable import WebFrontEnd

/// The sizes the page is told: a message with its images up to what a `send` carries, the
/// text up to what protod takes, and tether-web's own read of a frame bounded.
@Suite struct PageLimitsTests {
    @Test func thePageMaySendWhatProtodTakesAndTetherWebReadsAtMostTwiceThat() {
        let limits = PageLimits.standard
        #expect(limits.messageBytes == SendMessageCommand.maximumTextBytes)
        #expect(limits.frameBytes == BusSchema.maximumFrameBodySize + 64 * 1024)
        #expect(limits.attachmentBytes == ImageAttachments.busRoom(forText: "") && limits.imageBytes == 5_000_000)
        // Two photos of 5,000,000 bytes in base64 and the envelope fit one frame.
        #expect(2 * 6_666_668 + 4096 < limits.frameBytes)
        #expect(WebServer.frameReadLimit == 2 * limits.frameBytes && WebServer.frameReadLimit < 65 << 20)
    }

    @Test func thePagesOwnDefaultsAreTheLimitsTetherWebSends() throws {
        // Used only until the first frame brings the limits: they must not say otherwise.
        let script = try WebServer.asset("app.js")
        let limits = PageLimits.standard
        let defaults =
            "messageBytes: \(limits.messageBytes), draftBytes: \(limits.draftBytes), frameBytes: \(limits.frameBytes), gatewayOverheadBytes: \(limits.gatewayOverheadBytes), gatewayAttachmentOverheadBytes: \(limits.gatewayAttachmentOverheadBytes), attachmentBytes: \(limits.attachmentBytes), imageBytes: \(limits.imageBytes)"
        #expect(script.contains(defaults), "app.js's defaults differ from \(defaults)")
    }
}
