import Cairn
func f(_ c: Coordinator) { _ = c.store }
