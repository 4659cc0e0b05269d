from lethe_core.cli.main import main

main()
