use agentloop::tool;

/// Refund an order.
#[tool(requires_approval = "yes")]
fn refund(order: String) -> String {
    order
}

fn main() {}
