import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;

/**
 * Runs an embedded Neo4j Community DBMS with Bolt enabled until the JVM is told to stop.
 * All settings come from the neo4j.conf the Python launcher writes (args: home dir, conf file).
 * With auth enabled, MEMTEND_NEO4J_INITIAL_PASSWORD (read from the environment so it never shows
 * in the process list) replaces the default password of user neo4j while that one still has to be
 * changed, as `neo4j-admin dbms set-initial-password` does for a packaged server.
 */
public final class LocalNeo4j {
    public static void main(String[] args) throws InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: LocalNeo4j <home-dir> <neo4j.conf>");
            System.exit(2);
        }
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(Path.of(args[0]))
                .loadPropertiesFromFile(Path.of(args[1]))
                .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            dbms.shutdown();
            stopped.countDown();
        }, "neo4j-shutdown"));
        String password = System.getenv("MEMTEND_NEO4J_INITIAL_PASSWORD");
        if (password != null && !password.isEmpty()) {
            setInitialPassword(dbms.database("system"), password);
        }
        System.out.println("memtend-local-neo4j: started");
        System.out.flush();
        stopped.await();
    }

    private static void setInitialPassword(GraphDatabaseService system, String password) {
        boolean pending = system.executeTransactionally(
                "SHOW USERS YIELD user, passwordChangeRequired "
                        + "WHERE user = 'neo4j' RETURN passwordChangeRequired",
                Map.of(), result -> result.hasNext() && (Boolean) result.next().get("passwordChangeRequired"));
        if (pending) {
            system.executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                    Map.of("password", password));
        }
    }
}
