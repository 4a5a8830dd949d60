extension DeliveryStateMachine.Action {
    /// Whether carrying it out writes the outbox.
    var writesTheOutbox: Bool {
        switch self {
        case .persistSent, .persistDelivered, .persistFinal, .persistRequeued, .persistInGatewayQueue, .saveSession, .saveOpenStreams: true
        default: false
        }
    }

    /// The action's name, for the log.
    var name: String {
        switch self {
        case .write: "write"
        case .persistSent: "persistSent"
        case .persistDelivered: "persistDelivered"
        case .persistFinal: "persistFinal"
        case .persistRequeued: "persistRequeued"
        case .persistInGatewayQueue: "persistInGatewayQueue"
        case .publishEntry: "publishEntry"
        case .publishDelivery: "publishDelivery"
        case .publishStream: "publishStream"
        case .retainBotState: "retainBotState"
        case .retainHealth: "retainHealth"
        case .retainSummary: "retainSummary"
        case .diagnose: "diagnose"
        case .suggest: "suggest"
        case .saveSession: "saveSession"
        case .saveOpenStreams: "saveOpenStreams"
        case .reconnect: "reconnect"
        case .retainSession: "retainSession"
        case .retainApprovals: "retainApprovals"
        case .retainSettings: "retainSettings"
        case .commandAnswered: "commandAnswered"
        }
    }
}
