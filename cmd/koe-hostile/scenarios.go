package main

// scenarios lists every scenario, in the order they run.
func scenarios() []scenario {
	return []scenario{
		idleScenario(),
		rateBombScenario(),
		endlessScenario(),
		historyScenario(),
		echoScenario(),
		fdScenario(),
		shutdownScenario(),
		declaredBodyScenario(), declaredBodyTokenScenario(), gzipBombScenario(), healthFullScenario(), tokenLogScenario(),
		hugeTokenScenario(), endlessLineScenario(), errorPageScenario(), staleConnectionScenario(),
		mcpJunkScenario(), mcpManyScenario(),
		uploadsScenario(),
		pdfStructureScenario(),
	}
}
